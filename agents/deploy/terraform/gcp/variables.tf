variable "project" {
  description = "GCP project id."
  type        = string
}

variable "api_url" {
  description = "Stormwatch API base URL (https)."
  type        = string
}

variable "enrollment_token" {
  description = "Org enrollment token (swe_...)."
  type        = string
  sensitive   = true
}

variable "agent_url" {
  description = "Where instances download the static stormwatch-agent binary."
  type        = string
}

variable "zones" {
  description = "Zones to use per region."
  type        = map(list(string))
  default = {
    "us-east1"     = ["us-east1-b", "us-east1-c", "us-east1-d"]
    "europe-west1" = ["europe-west1-b", "europe-west1-c", "europe-west1-d"]
  }
}

variable "agents_per_region" {
  description = "Agents per region, spread round-robin over its zones."
  type        = number
  default     = 3
}

variable "machine_type" {
  description = "Seed 003 used e2-standard-2."
  type        = string
  default     = "e2-standard-2"
}

variable "network" {
  description = "VPC network of the agents."
  type        = string
  default     = "default"
}

variable "mesh_cidrs" {
  description = "Sources allowed to reach the mesh port 7300 and the throughput port 7710."
  type        = list(string)
  default     = ["0.0.0.0/0"]
}
