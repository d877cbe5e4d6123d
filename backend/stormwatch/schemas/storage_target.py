"""Storage targets over the REST API. Secrets go in, never out."""

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, StrictBool, model_validator

# Seed 000 §3: binary 1 kB–10 MB, base64 text 1 kB–50 MB.
DEFAULT_BINARY_SIZES = [1 << 10, 10 << 10, 100 << 10, 1 << 20, 10 << 20]
DEFAULT_TEXT_SIZES = [1 << 10, 10 << 10, 100 << 10, 1 << 20, 10 << 20, 25 << 20, 50 << 20]

Size = Annotated[int, Field(ge=1, le=1 << 30)]
Content = Literal["binary", "text"]
_ENV_VAR = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"


def _text_only() -> list[Content]:
    return ["text"]


def _both_contents() -> list[Content]:
    return ["binary", "text"]


class Sizes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    binary: list[Size] = Field(default_factory=lambda: list(DEFAULT_BINARY_SIZES), max_length=20)
    text: list[Size] = Field(default_factory=lambda: list(DEFAULT_TEXT_SIZES), max_length=20)


class Gzip9(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: StrictBool = False
    contents: list[Content] = Field(default_factory=_text_only, min_length=1)
    sizes_bytes: Sizes | None = None


class Replication(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: StrictBool = False
    copies: int = Field(default=3, ge=1, le=16)
    sizes_bytes: list[Size] | None = Field(default=None, max_length=20)


class Consistency(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: StrictBool = False
    read_after_write: StrictBool = True
    list_after_write: StrictBool = True
    size_bytes: int = Field(default=1 << 10, ge=64, le=1 << 30)
    poll_interval_ms: int = Field(default=10, ge=1, le=60_000)
    max_wait_ms: int = Field(default=30_000, ge=1, le=600_000)


class Concurrency(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: StrictBool = False
    levels: list[Annotated[int, Field(ge=1, le=256)]] = Field(
        default_factory=lambda: [1, 2, 4, 8, 16, 32], min_length=1, max_length=16)
    size_bytes: Size = 10 << 20


class Variants(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gzip9: Gzip9 = Field(default_factory=Gzip9)
    replication: Replication = Field(default_factory=Replication)
    consistency: Consistency = Field(default_factory=Consistency)
    concurrency: Concurrency = Field(default_factory=Concurrency)


class EnvCredentials(BaseModel):
    """Secrets in the agent host's environment; only the variable names are stored."""

    model_config = ConfigDict(extra="forbid")

    source: Literal["env"]
    access_key_id_var: str | None = Field(default=None, pattern=_ENV_VAR)
    secret_access_key_var: str | None = Field(default=None, pattern=_ENV_VAR)
    session_token_var: str | None = Field(default=None, pattern=_ENV_VAR)
    account_name_var: str | None = Field(default=None, pattern=_ENV_VAR)
    account_key_var: str | None = Field(default=None, pattern=_ENV_VAR)
    sas_token_var: str | None = Field(default=None, pattern=_ENV_VAR)
    service_account_json_var: str | None = Field(default=None, pattern=_ENV_VAR)


class FileCredentials(BaseModel):
    """A JSON file on the agent host (a GCS service-account key file is used as it is)."""

    model_config = ConfigDict(extra="forbid")

    source: Literal["file"]
    path: str = Field(min_length=1, max_length=1000, pattern=r"^/")


class InlineCredentials(BaseModel):
    """Secrets kept encrypted on the server and sent only to the assigned agents."""

    model_config = ConfigDict(extra="forbid")

    source: Literal["inline"]
    access_key_id: SecretStr | None = None
    secret_access_key: SecretStr | None = None
    session_token: SecretStr | None = None
    account_name: str | None = Field(default=None, max_length=100)
    account_key: SecretStr | None = None
    sas_token: SecretStr | None = None
    service_account_json: SecretStr | None = None


class NoCredentials(BaseModel):
    """Anonymous access (public buckets, local emulators)."""

    model_config = ConfigDict(extra="forbid")

    source: Literal["none"]


Credentials = Annotated[EnvCredentials | FileCredentials | InlineCredentials | NoCredentials,
                        Field(discriminator="source")]


class StorageTargetBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    endpoint: str = Field(default="", max_length=500, pattern=r"^(https?://[^\s/]+(/\S*)?)?$",
                          description="Empty for the provider's public endpoint")
    region: str = Field(default="", max_length=100)
    prefix: str = Field(default="stormwatch-probe/", min_length=1, max_length=400,
                        description="Every probe object lives under <prefix><agent_id>/")
    path_style: StrictBool = False
    interval_s: int = Field(default=600, ge=10, le=86400)
    op_timeout_ms: int = Field(default=120_000, ge=100, le=600_000)
    contents: list[Content] = Field(default_factory=_both_contents, min_length=1)
    sizes_bytes: Sizes = Field(default_factory=Sizes)
    variants: Variants = Field(default_factory=Variants)
    enabled: StrictBool = True
    assign_all: StrictBool = Field(default=False, description="Probe from every agent of the org")
    agent_ids: list[uuid.UUID] = Field(default_factory=list, max_length=1000)


class StorageTargetCreate(StorageTargetBase):
    name: str = Field(min_length=1, max_length=200)
    provider: Literal["s3", "azure", "gcs"]
    bucket: str = Field(min_length=1, max_length=255, description="Bucket, or Azure container")
    credentials: Credentials

    @model_validator(mode="after")
    def _credentials_fit_provider(self) -> "StorageTargetCreate":
        check_inline(self.provider, self.credentials)
        return self


class StorageTargetUpdate(BaseModel):
    """Any subset of fields; `credentials` replaces the stored reference whole."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=200)
    bucket: str | None = Field(default=None, min_length=1, max_length=255)
    endpoint: str | None = Field(default=None, max_length=500,
                                 pattern=r"^(https?://[^\s/]+(/\S*)?)?$")
    region: str | None = Field(default=None, max_length=100)
    prefix: str | None = Field(default=None, min_length=1, max_length=400)
    path_style: StrictBool | None = None
    interval_s: int | None = Field(default=None, ge=10, le=86400)
    op_timeout_ms: int | None = Field(default=None, ge=100, le=600_000)
    contents: list[Content] | None = Field(default=None, min_length=1)
    sizes_bytes: Sizes | None = None
    variants: Variants | None = None
    enabled: StrictBool | None = None
    assign_all: StrictBool | None = None
    agent_ids: list[uuid.UUID] | None = Field(default=None, max_length=1000)
    credentials: Credentials | None = None


def check_inline(provider: str, creds: object) -> None:
    """Inline credentials must carry what the provider needs."""
    if not isinstance(creds, InlineCredentials):
        return
    if provider == "s3" and (creds.access_key_id is None) != (creds.secret_access_key is None):
        raise ValueError("s3 inline credentials need both access_key_id and secret_access_key")
    if provider == "azure" and (creds.account_key or creds.sas_token) and not creds.account_name:
        raise ValueError("azure inline credentials need account_name with account_key")
    if provider == "gcs" and creds.service_account_json is None:
        raise ValueError("gcs inline credentials need service_account_json")


class CredentialsPublic(BaseModel):
    """What a read API says about credentials: where they come from, never their value."""

    source: str
    path: str | None = None
    env_vars: dict[str, str] = Field(default_factory=dict)
    has_secret: StrictBool = False
    account_name: str | None = None


class StorageTargetPublic(BaseModel):
    id: uuid.UUID
    name: str
    provider: str
    endpoint: str
    region: str
    bucket: str
    prefix: str
    path_style: bool
    interval_s: int
    op_timeout_ms: int
    contents: list[str]
    sizes_bytes: Sizes
    variants: Variants
    enabled: bool
    assign_all: bool
    agent_ids: list[uuid.UUID]
    credentials: CredentialsPublic
    created_at: datetime
    updated_at: datetime
