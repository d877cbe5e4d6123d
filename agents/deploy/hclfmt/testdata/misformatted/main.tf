# Misaligned on purpose: deploy/check.sh makes sure the formatter check rejects it.
variable "agents" {
  type = number
  default     = 3
}

resource "null_resource" "agent" {
count = var.agents
}
