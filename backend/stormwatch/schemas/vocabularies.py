from pydantic import BaseModel, Field

from stormwatch.schemas.alerts import MetricsCatalog


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
    alert_metrics: MetricsCatalog = Field(
        description="What an alert rule can watch: metrics, statistics, filters, conditions")
