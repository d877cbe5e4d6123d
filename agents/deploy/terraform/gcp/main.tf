# Stormwatch agents on GCP: agents spread over the zones of several regions. One provider
# covers every region. Example only: review machine types, networks and costs first.

terraform {
  required_version = ">= 1.5"
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = "~> 5.0"
    }
  }
}

provider "google" {
  project = var.project
}

locals {
  # One entry per agent: zones are used round-robin so agents spread across them.
  placements = flatten([
    for region, zones in var.zones : [
      for i in range(var.agents_per_region) : {
        name = "sw-${region}-${i + 1}"
        zone = zones[i % length(zones)]
      }
    ]
  ])
}

resource "google_compute_firewall" "mesh" {
  name          = "stormwatch-agent-mesh"
  network       = var.network
  source_ranges = var.mesh_cidrs
  target_tags   = ["stormwatch-agent"]

  allow {
    protocol = "tcp"
    ports    = ["7300"]
  }
}

# The throughput probe: TCP streams and UDP datagrams on one port (throughput.listen).
resource "google_compute_firewall" "throughput" {
  name          = "stormwatch-agent-throughput"
  network       = var.network
  source_ranges = var.mesh_cidrs
  target_tags   = ["stormwatch-agent"]

  allow {
    protocol = "tcp"
    ports    = ["7710"]
  }

  allow {
    protocol = "udp"
    ports    = ["7710"]
  }
}

resource "google_compute_instance" "agent" {
  for_each     = { for p in local.placements : p.name => p }
  name         = each.key
  zone         = each.value.zone
  machine_type = var.machine_type
  tags         = ["stormwatch-agent"]

  boot_disk {
    initialize_params {
      image = "debian-cloud/debian-12"
    }
  }

  network_interface {
    network = var.network
    access_config {}
  }

  metadata = {
    startup-script = templatefile("${path.module}/../cloud-init.sh.tftpl", {
      api_url          = var.api_url
      enrollment_token = var.enrollment_token
      agent_url        = var.agent_url
      name             = each.key
      unit             = file("${path.module}/../../systemd/stormwatch-agent.service")
      public_ip_cmd    = "curl -s -H 'Metadata-Flavor: Google' http://metadata.google.internal/computeMetadata/v1/instance/network-interfaces/0/access-configs/0/external-ip"
    })
  }
}

output "agents" {
  value = [for i in google_compute_instance.agent : { name = i.name, zone = i.zone, public_ip = i.network_interface[0].access_config[0].nat_ip }]
}
