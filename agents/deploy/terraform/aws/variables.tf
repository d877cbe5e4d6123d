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

variable "agents_per_region" {
  description = "Agents per region, spread round-robin over its availability zones."
  type        = number
  default     = 3
}

variable "instance_type" {
  description = "Seed 003 used m5.large (2 vCPU, 8 GB)."
  type        = string
  default     = "m5.large"
}

variable "mesh_cidrs" {
  description = "Sources allowed to reach the mesh port 7300 and the throughput port 7710 (agents in every region)."
  type        = list(string)
  default     = ["0.0.0.0/0"]
}
