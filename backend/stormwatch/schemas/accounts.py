import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from stormwatch.schemas.types import IsoDatetime


class ApiKeyCreate(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    scope: str = Field(default="admin", pattern="^(admin|read)$", description=(
        "admin: acts as an admin of the org; read: reads everything of the org as a viewer "
        "does and changes nothing (e.g. a Prometheus scrape job)"))


class ApiKeyPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    prefix: str
    scope: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class ApiKeyCreated(ApiKeyPublic):
    key: str = Field(description="The full key. Shown once; only its hash is stored.")


class EnrollmentTokenCreate(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    expires_at: IsoDatetime | None = None


class EnrollmentTokenPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    prefix: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None


class EnrollmentTokenCreated(EnrollmentTokenPublic):
    token: str = Field(description="The full token. Shown once; only its hash is stored.")


class UserCreate(BaseModel):
    email: str = Field(min_length=3, max_length=320, pattern=r"^[^@\s]+@[^@\s]+$")
    password: str = Field(min_length=12, max_length=500)
    role: str = Field(default="admin", pattern="^(admin|viewer)$")


class UserPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    email: str
    role: str
    created_at: datetime


class MeshSettings(BaseModel):
    enabled: StrictBool = True
    rate_hz: float = Field(default=10, gt=0, le=1000)
    payload_bytes: int = Field(default=1024, ge=16, le=1024 * 1024)
    timeout_ms: int = Field(default=1000, ge=1, le=60_000)
    path_trace_interval_s: int = Field(default=600, ge=0, le=86_400, description=(
        "How often each agent traces the path to each peer; 0 turns scheduled traces off "
        "(traces the server asks for still run); at least 60 otherwise"))
    path_trace_proto: Literal["tcp", "udp"] = Field(default="tcp", description=(
        "tcp probes the peer's mesh port (passes where the mesh passes); udp a closed high port"))

    @field_validator("path_trace_interval_s")
    @classmethod
    def _interval(cls, v: int) -> int:
        if 0 < v < 60:
            raise ValueError("path_trace_interval_s is 0 (off) or at least 60")
        return v


class OrgPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    slug: str
    raw_retention_days: int
    rollup_retention_days: int
    mesh_settings: MeshSettings


class OrgUpdate(BaseModel):
    name: str | None = Field(default=None, min_length=1, max_length=200)
    raw_retention_days: int | None = Field(default=None, ge=1, le=90)
    rollup_retention_days: int | None = Field(default=None, ge=7, le=3650)
    mesh_settings: MeshSettings | None = None


class InvitationCreate(BaseModel):
    email: str = Field(min_length=3, max_length=320, pattern=r"^[^@\s]+@[^@\s]+$")
    role: str = Field(default="viewer", pattern="^(admin|viewer)$")


class InvitationPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    email: str
    role: str
    created_at: datetime
    expires_at: datetime


class InvitationCreated(InvitationPublic):
    email_sent: bool
    # The link itself, shown this once, when no mail carried it: the admin passes it on.
    invite_url: str | None = None
    detail: str


_DOMAIN = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$"

Domain = Annotated[str, Field(max_length=253, pattern=_DOMAIN)]


class OidcConfigUpdate(BaseModel):
    issuer_url: str = Field(min_length=8, max_length=500)
    client_id: str = Field(min_length=1, max_length=300)
    # Write-only; left out on a later save, the stored one stays.
    client_secret: str | None = Field(default=None, min_length=1, max_length=2000)
    default_role: str = Field(default="viewer", pattern="^(admin|viewer)$")
    # Lower-case domains whose verified addresses may sign in; empty: any.
    allowed_domains: list[Domain] = Field(default_factory=list, max_length=50)


class OidcConfigPublic(BaseModel):
    issuer_url: str
    client_id: str
    default_role: str
    allowed_domains: list[str]
    has_client_secret: bool
    # What the admin registers at the provider as the redirect (callback) URI.
    redirect_uri: str
    updated_at: datetime
