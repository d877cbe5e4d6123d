import ipaddress
import re
import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$")


def host_port(value: str) -> str:
    """`host:port` with a hostname or IPv4 address, or `[IPv6]:port`; port 1-65535."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError("must be host:port with a port from 1 to 65535")
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError("the bracketed host must be an IPv6 address") from None
        return value
    if not host or ":" in host or not _HOSTNAME.match(host):
        raise ValueError("the host must be a hostname, an IPv4 address or [IPv6]")
    return value


class AgentMetadata(BaseModel):
    provider: str = Field(default="", max_length=50)
    region: str = Field(default="", max_length=100)
    zone: str = Field(default="", max_length=100)
    subnet: str = Field(default="", max_length=200)
    instance_type: str = Field(default="", max_length=100)
    private_ip: str = Field(default="", max_length=64)
    public_ip: str = Field(default="", max_length=64)


class EnrollRequest(BaseModel):
    enrollment_token: str = Field(min_length=10, max_length=200)
    name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    agent_version: str = Field(default="", max_length=50)
    mesh_address: str = Field(default="", max_length=300, description=(
        "host:port peers dial for the mesh echo; \"\" when the agent does not mesh. "
        "Loopback only from an agent on the API's host; never unspecified, link-local or "
        "multicast"))
    metadata: AgentMetadata = AgentMetadata()

    @field_validator("mesh_address")
    @classmethod
    def _host_port(cls, v: str) -> str:
        return v if not v else host_port(v)


class EnrollResponse(BaseModel):
    agent_id: uuid.UUID
    agent_token: str
    org_id: uuid.UUID


class AgentSelfUpdate(BaseModel):
    agent_version: str | None = Field(default=None, max_length=50)
    mesh_address: str | None = Field(default=None, max_length=300, description=(
        "host:port peers dial for the mesh echo, held to the rule of enrollment"))
    throughput_address: str | None = Field(default=None, max_length=300, description=(
        "host:port of the throughput control listener; \"\" when the probe is off"))
    metadata: AgentMetadata | None = None

    @field_validator("mesh_address", "throughput_address")
    @classmethod
    def _host_port(cls, v: str | None) -> str | None:
        return v if not v else host_port(v)


class AgentPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    provider: str
    region: str
    zone: str
    subnet: str
    instance_type: str
    private_ip: str
    public_ip: str
    mesh_address: str
    throughput_address: str
    agent_version: str
    token_prefix: str
    first_seen: datetime
    last_seen: datetime | None
    status: str = Field(description="online (seen in the last 2 min), stale, or never_seen")


class AgentPairPublic(BaseModel):
    src_agent_id: uuid.UUID
    dst_agent_id: uuid.UUID
    topology_class: str


class QuorumGroupPublic(BaseModel):
    name: str
    k: int = Field(description="the quorum latency of a round is the k-th fastest reply")
    members: list[uuid.UUID] = Field(description="agent ids, the sender included")
