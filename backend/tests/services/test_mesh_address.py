"""The mesh address rule on its own: the operator's MESH_ADDRESS_ALLOW opens networks to any
client, and its typos are refused at start."""

from __future__ import annotations

import pytest

from stormwatch.core.config import Settings
from stormwatch.services.mesh_address import parse_allow, refusal

REMOTE = "198.51.100.7"


def test_the_allow_list_opens_its_networks_to_remote_clients_only_them():
    allow = parse_allow("127.0.0.0/8, fe80::/10")
    assert refusal("127.0.0.1:7301", REMOTE, allow) is None
    assert refusal("[::ffff:127.0.0.1]:7301", REMOTE, allow) is None
    assert refusal("[fe80::1]:7301", REMOTE, allow) is None
    assert refusal("[::1]:7301", REMOTE, allow) is not None
    assert refusal("169.254.1.1:7301", REMOTE, allow) is not None


def test_refusals_say_what_the_address_is():
    assert "loopback" in (refusal("127.0.0.1:1", REMOTE, []) or "")
    assert "unspecified" in (refusal("0.0.0.0:1", "127.0.0.1", []) or "")
    assert "link-local" in (refusal("169.254.169.254:1", REMOTE, []) or "")
    assert refusal("127.0.0.1:1", "::ffff:127.0.0.1", []) is None  # a local client, mapped
    assert refusal("127.0.0.1:1", "unknown", []) is not None
    assert refusal("", REMOTE, []) is None


def test_a_malformed_allow_list_stops_the_process():
    with pytest.raises(ValueError, match="MESH_ADDRESS_ALLOW"):
        Settings(mesh_address_allow="127.0.0.0/8, not-a-cidr")
    assert Settings(mesh_address_allow="10.1.0.0/16").mesh_address_allow_networks
