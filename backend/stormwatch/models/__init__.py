"""All models, imported here so metadata is complete for Alembic and tests."""

from stormwatch.models.advisors import AdvisorResult, PricingOverride
from stormwatch.models.agent import (
    TOPOLOGY_CLASSES,
    Agent,
    AgentPair,
    DeletedAgent,
    EnrollmentToken,
)
from stormwatch.models.alerts import Alert, AlertEvent, AlertRule, AlertSeriesState
from stormwatch.models.audit import AuditEvent
from stormwatch.models.base import Base
from stormwatch.models.export import OtlpExport
from stormwatch.models.geography import OrgPlace
from stormwatch.models.jobs import JobRun
from stormwatch.models.notifications import (
    AlertEventDispatch,
    AlertNotifyState,
    MaintenanceWindow,
    Notification,
    NotificationChannel,
    NotificationDelivery,
    Silence,
)
from stormwatch.models.org import AccountLink, ApiKey, OidcConfig, OidcLogin, Org, User, UserSession
from stormwatch.models.paths import PairPath, PathTrace, PathTraceRequest
from stormwatch.models.samples import (
    RAW_ORG_FILTER,
    RAW_TABLES,
    IngestBatch,
    mesh_raw,
    mesh_samples,
    mesh_series,
    quorum_samples,
    storage_samples,
    throughput_samples,
)
from stormwatch.models.storage_target import StorageTarget, StorageTargetAgent
from stormwatch.models.throughput import (
    ThroughputBudgetLedger,
    ThroughputExperiment,
    ThroughputSettings,
)

__all__ = [
    "PairPath",
    "PathTrace",
    "PathTraceRequest",
    "AccountLink",
    "OidcConfig",
    "OtlpExport",
    "OrgPlace",
    "OidcLogin",
    "AuditEvent",
    "AdvisorResult",
    "DeletedAgent",
    "RAW_ORG_FILTER",
    "RAW_TABLES",
    "TOPOLOGY_CLASSES",
    "Agent",
    "JobRun",
    "AgentPair",
    "Alert",
    "AlertEvent",
    "AlertEventDispatch",
    "AlertNotifyState",
    "AlertRule",
    "AlertSeriesState",
    "ApiKey",
    "Base",
    "EnrollmentToken",
    "IngestBatch",
    "MaintenanceWindow",
    "Notification",
    "NotificationChannel",
    "NotificationDelivery",
    "Org",
    "PricingOverride",
    "Silence",
    "StorageTarget",
    "StorageTargetAgent",
    "ThroughputBudgetLedger",
    "ThroughputExperiment",
    "ThroughputSettings",
    "User",
    "UserSession",
    "mesh_raw",
    "mesh_samples",
    "mesh_series",
    "quorum_samples",
    "storage_samples",
    "throughput_samples",
]
