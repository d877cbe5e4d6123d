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
  description = "Where VMs download the static stormwatch-agent binary."
  type        = string
}

variable "regions" {
  description = "Azure regions with availability zones."
  type        = list(string)
  default     = ["eastus", "westeurope"]
}

variable "agents_per_region" {
  description = "Agents per region, spread round-robin over zones 1-3."
  type        = number
  default     = 3
}

variable "vm_size" {
  description = "Seed 003 used Standard_D2s_v3."
  type        = string
  default     = "Standard_D2s_v3"
}

variable "ssh_public_key" {
  description = "SSH public key for the admin user."
  type        = string
}

variable "mesh_cidrs" {
  description = "Sources allowed to reach the mesh port 7300 and the throughput port 7710."
  type        = list(string)
  default     = ["0.0.0.0/0"]
}
