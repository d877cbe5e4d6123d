from typing import Literal

from pydantic import BaseModel, Field

from stormwatch.schemas.alerts import MetricsCatalog


class ChannelField(BaseModel):
    """One setting of a channel kind as a form offers it (maps and CA bundles are API-only)."""

    name: str = Field(description="the key in the channel's config")
    label: str
    input: Literal["text", "url", "password", "number", "email", "select", "list"] = Field(
        description="list: comma-separated values")
    required: bool
    choices: list[str] = Field(description="a select's values")
    secret: bool = Field(description="write-only: never shown back")
    default: str | None


class ChannelKindInfo(BaseModel):
    name: str = Field(description="the channel's `kind`")
    title: str
    fields: list[ChannelField]


class Vocabularies(BaseModel):
    """The closed lists of values the API accepts, in display order."""

    topology_classes: list[str] = Field(
        description="Topology class of an agent pair (analysis filter topology_class)")
    statistics: list[str] = Field(
        description="Statistics offered for rankings and analyses; any percentile pX "
                    "(0 < X < 100) is accepted besides those listed")
    storage_ops: list[str] = Field(description="Storage sample operations (filter op)")
    storage_variants: list[str] = Field(description="Storage sample variants (filter variant)")
    storage_providers: list[str] = Field(description="Object-storage providers of a target")
    protos: list[str] = Field(description="Throughput protocols (filter proto)")
    channel_kinds: list[ChannelKindInfo] = Field(
        description="Notification channel kinds and the settings a form offers for each")
    alert_metrics: MetricsCatalog = Field(
        description="What an alert rule can watch: metrics, statistics, filters, conditions")
    export_kinds: list[str] = Field(
        description="Measurements the Prometheus and OTLP exports hold (kind, kinds)")
    export_levels: list[str] = Field(
        description="Granularity of the exports' series (level): region or agent pair")
