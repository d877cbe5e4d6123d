terraform {
  required_providers {
    aws = {
      source = "hashicorp/aws"
    }
  }
}

variable "name_prefix" { type = string }
variable "agent_count" { type = number }
variable "instance_type" { type = string }
variable "api_url" { type = string }
variable "enrollment_token" {
  type      = string
  sensitive = true
}
variable "agent_url" { type = string }
variable "mesh_cidrs" { type = list(string) }

data "aws_availability_zones" "available" {
  state = "available"
}

data "aws_ami" "debian" {
  most_recent = true
  owners      = ["136693071363"] # Debian
  filter {
    name   = "name"
    values = ["debian-12-amd64-*"]
  }
}

data "aws_vpc" "default" {
  default = true
}

data "aws_subnets" "default" {
  filter {
    name   = "vpc-id"
    values = [data.aws_vpc.default.id]
  }
  filter {
    name   = "default-for-az"
    values = ["true"]
  }
}

data "aws_subnet" "by_id" {
  for_each = toset(data.aws_subnets.default.ids)
  id       = each.value
}

locals {
  zones          = sort(data.aws_availability_zones.available.names)
  subnet_by_zone = { for s in data.aws_subnet.by_id : s.availability_zone => s.id }
  placed_zones   = [for z in local.zones : z if contains(keys(local.subnet_by_zone), z)]
}

resource "aws_security_group" "agent" {
  name_prefix = "${var.name_prefix}-agent-"
  description = "Stormwatch agent mesh echo and throughput ports"
  vpc_id      = data.aws_vpc.default.id

  ingress {
    description = "mesh echo (TCP)"
    from_port   = 7300
    to_port     = 7300
    protocol    = "tcp"
    cidr_blocks = var.mesh_cidrs
  }

  ingress {
    description = "throughput probe (TCP streams)"
    from_port   = 7710
    to_port     = 7710
    protocol    = "tcp"
    cidr_blocks = var.mesh_cidrs
  }

  ingress {
    description = "throughput probe (UDP datagrams)"
    from_port   = 7710
    to_port     = 7710
    protocol    = "udp"
    cidr_blocks = var.mesh_cidrs
  }

  egress {
    from_port   = 0
    to_port     = 0
    protocol    = "-1"
    cidr_blocks = ["0.0.0.0/0"]
  }
}

resource "aws_instance" "agent" {
  count                  = var.agent_count
  ami                    = data.aws_ami.debian.id
  instance_type          = var.instance_type
  subnet_id              = local.subnet_by_zone[element(local.placed_zones, count.index)]
  vpc_security_group_ids = [aws_security_group.agent.id]

  metadata_options {
    http_tokens   = "required" # IMDSv2, which the agent uses
    http_endpoint = "enabled"
  }

  user_data = templatefile("${path.module}/../../../cloud-init.sh.tftpl", {
    api_url          = var.api_url
    enrollment_token = var.enrollment_token
    agent_url        = var.agent_url
    name             = "${var.name_prefix}-${count.index + 1}"
    unit             = file("${path.module}/../../../../systemd/stormwatch-agent.service")
    public_ip_cmd    = "TOKEN=$(curl -s -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' http://169.254.169.254/latest/api/token); curl -s -H \"X-aws-ec2-metadata-token: $TOKEN\" http://169.254.169.254/latest/meta-data/public-ipv4"
  })

  tags = {
    Name = "${var.name_prefix}-${count.index + 1}"
    role = "stormwatch-agent"
  }
}

output "agents" {
  value = [for i in aws_instance.agent : { name = i.tags.Name, zone = i.availability_zone, public_ip = i.public_ip }]
}
