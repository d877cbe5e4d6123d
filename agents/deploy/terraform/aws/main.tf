# Stormwatch agents on AWS: N agents per region, spread over the region's availability
# zones. Terraform needs one provider per region, so each region is a module instance.
# Example only: review instance types, networks and costs before applying.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.0"
    }
  }
}

provider "aws" {
  alias  = "east"
  region = "us-east-1"
}

provider "aws" {
  alias  = "west"
  region = "us-west-2"
}

module "us_east_1" {
  source = "./modules/region"
  providers = {
    aws = aws.east
  }
  name_prefix      = "sw-use1"
  agent_count      = var.agents_per_region
  instance_type    = var.instance_type
  api_url          = var.api_url
  enrollment_token = var.enrollment_token
  agent_url        = var.agent_url
  mesh_cidrs       = var.mesh_cidrs
}

module "us_west_2" {
  source = "./modules/region"
  providers = {
    aws = aws.west
  }
  name_prefix      = "sw-usw2"
  agent_count      = var.agents_per_region
  instance_type    = var.instance_type
  api_url          = var.api_url
  enrollment_token = var.enrollment_token
  agent_url        = var.agent_url
  mesh_cidrs       = var.mesh_cidrs
}

output "agents" {
  value = concat(module.us_east_1.agents, module.us_west_2.agents)
}
