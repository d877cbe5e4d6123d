# Stormwatch agents on Azure: agents spread over the availability zones of several regions,
# one resource group and virtual network per region. Example only: review VM sizes,
# networks and costs before applying.

terraform {
  required_version = ">= 1.5"
  required_providers {
    azurerm = {
      source  = "hashicorp/azurerm"
      version = "~> 3.100"
    }
  }
}

provider "azurerm" {
  features {}
}

locals {
  placements = flatten([
    for region in var.regions : [
      for i in range(var.agents_per_region) : {
        name   = "sw-${region}-${i + 1}"
        region = region
        zone   = tostring(i % 3 + 1)
      }
    ]
  ])
  agents = { for p in local.placements : p.name => p }
}

resource "azurerm_resource_group" "region" {
  for_each = toset(var.regions)
  name     = "stormwatch-agents-${each.key}"
  location = each.key
}

resource "azurerm_virtual_network" "region" {
  for_each            = toset(var.regions)
  name                = "stormwatch-${each.key}"
  location            = each.key
  resource_group_name = azurerm_resource_group.region[each.key].name
  address_space       = ["10.${index(var.regions, each.key) + 10}.0.0/16"]
}

resource "azurerm_subnet" "agents" {
  for_each             = toset(var.regions)
  name                 = "agents"
  resource_group_name  = azurerm_resource_group.region[each.key].name
  virtual_network_name = azurerm_virtual_network.region[each.key].name
  address_prefixes     = ["10.${index(var.regions, each.key) + 10}.1.0/24"]
}

resource "azurerm_network_security_group" "mesh" {
  for_each            = toset(var.regions)
  name                = "stormwatch-mesh"
  location            = each.key
  resource_group_name = azurerm_resource_group.region[each.key].name

  security_rule {
    name                       = "mesh-echo"
    priority                   = 100
    direction                  = "Inbound"
    access                     = "Allow"
    protocol                   = "Tcp"
    source_port_range          = "*"
    destination_port_range     = "7300"
    source_address_prefixes    = var.mesh_cidrs
    destination_address_prefix = "*"
  }

  # The throughput probe: TCP streams and UDP datagrams on one port (throughput.listen).
  security_rule {
    name                       = "throughput"
    priority                   = 110
    direction                  = "Inbound"
    access                     = "Allow"
    protocol                   = "*"
    source_port_range          = "*"
    destination_port_range     = "7710"
    source_address_prefixes    = var.mesh_cidrs
    destination_address_prefix = "*"
  }
}

resource "azurerm_subnet_network_security_group_association" "mesh" {
  for_each                  = toset(var.regions)
  subnet_id                 = azurerm_subnet.agents[each.key].id
  network_security_group_id = azurerm_network_security_group.mesh[each.key].id
}

resource "azurerm_public_ip" "agent" {
  for_each            = local.agents
  name                = "${each.key}-ip"
  location            = each.value.region
  resource_group_name = azurerm_resource_group.region[each.value.region].name
  allocation_method   = "Static"
  sku                 = "Standard"
  zones               = [each.value.zone]
}

resource "azurerm_network_interface" "agent" {
  for_each            = local.agents
  name                = "${each.key}-nic"
  location            = each.value.region
  resource_group_name = azurerm_resource_group.region[each.value.region].name

  ip_configuration {
    name                          = "primary"
    subnet_id                     = azurerm_subnet.agents[each.value.region].id
    private_ip_address_allocation = "Dynamic"
    public_ip_address_id          = azurerm_public_ip.agent[each.key].id
  }
}

resource "azurerm_linux_virtual_machine" "agent" {
  for_each              = local.agents
  name                  = each.key
  location              = each.value.region
  resource_group_name   = azurerm_resource_group.region[each.value.region].name
  size                  = var.vm_size
  zone                  = each.value.zone
  admin_username        = "stormwatch"
  network_interface_ids = [azurerm_network_interface.agent[each.key].id]

  admin_ssh_key {
    username   = "stormwatch"
    public_key = var.ssh_public_key
  }

  os_disk {
    caching              = "ReadWrite"
    storage_account_type = "Standard_LRS"
  }

  source_image_reference {
    publisher = "Debian"
    offer     = "debian-12"
    sku       = "12-gen2"
    version   = "latest"
  }

  custom_data = base64encode(templatefile("${path.module}/../cloud-init.sh.tftpl", {
    api_url          = var.api_url
    enrollment_token = var.enrollment_token
    agent_url        = var.agent_url
    name             = each.key
    unit             = file("${path.module}/../../systemd/stormwatch-agent.service")
    public_ip_cmd    = "curl -s -H 'Metadata: true' 'http://169.254.169.254/metadata/instance/network/interface/0/ipv4/ipAddress/0/publicIpAddress?api-version=2021-02-01&format=text'"
  }))
}

output "agents" {
  value = [for k, v in local.agents : { name = k, region = v.region, zone = v.zone, public_ip = azurerm_public_ip.agent[k].ip_address }]
}
