import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


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
    mesh_address: str = Field(default="", max_length=300)
    metadata: AgentMetadata = AgentMetadata()


class EnrollResponse(BaseModel):
    agent_id: uuid.UUID
    agent_token: str
    org_id: uuid.UUID


class AgentSelfUpdate(BaseModel):
    agent_version: str | None = Field(default=None, max_length=50)
    mesh_address: str | None = Field(default=None, max_length=300)
    metadata: AgentMetadata | None = None


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
