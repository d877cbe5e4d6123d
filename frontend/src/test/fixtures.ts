// Answers shaped as the API's OpenAPI schema documents them (MetricsCatalog, AlertPublic, ...).
export const AGENTS = [
  { id: "a1", name: "aws-use1-a-1", status: "online", provider: "aws", region: "us-east-1", zone: "us-east-1a", subnet: "s1", agent_version: "1", last_seen: null },
  { id: "a2", name: "aws-euw1-a-1", status: "online", provider: "aws", region: "eu-west-1", zone: "eu-west-1a", subnet: "s2", agent_version: "1", last_seen: null },
  { id: "a3", name: "aws-euw1-b-1", status: "online", provider: "aws", region: "eu-west-1", zone: "eu-west-1b", subnet: "s3", agent_version: "1", last_seen: null },
];

export const CATALOG = {
  metrics: [
    {
      name: "mesh_rtt",
      title: "Mesh round-trip time",
      unit: "us",
      statistics: ["p50", "p99", "p99.99", "mean", "std", "loss_rate"],
      units: { p50: "us", p99: "us", "p99.99": "us", mean: "us", std: "us", loss_rate: "ratio" },
      filters: ["agents", "src", "regions", "zones", "providers", "dst", "topology_class", "payload_bytes"],
      conditions: ["above", "below", "baseline", "level_shift"],
    },
    { name: "agent_silence", title: "Agent silence", unit: "s", statistics: ["silence_s"], units: { silence_s: "s" }, filters: ["agents", "regions"], conditions: ["above"] },
    { name: "path_changed", title: "Path changes", unit: "count", statistics: ["changes"], units: { changes: "count" }, filters: ["agents", "src", "dst", "topology_class"], conditions: ["above"] },
    { name: "mesh_stretch", title: "Mesh RTT stretch", unit: "x", statistics: ["p50", "mean"], units: { p50: "x", mean: "x" }, filters: ["agents", "src", "dst"], conditions: ["above", "below"] },
  ],
  conditions: ["above", "below", "baseline", "level_shift"],
  baselines: ["prev_24h", "week_ago"],
  directions: ["up", "down", "either"],
  severities: ["critical", "warning", "info"],
  window_s: { min: 30, max: 3600 },
};

export const VOCABULARIES = {
  topology_classes: ["self", "same_subnet", "cross_subnet", "cross_az", "cross_region", "cross_provider"],
  statistics: ["p50", "p90", "p99", "p99.9", "mean", "std", "loss_rate"],
  storage_ops: ["put", "get", "get_first", "read_after_write", "list_after_write", "rtt"],
  storage_variants: ["plain", "gzip9", "replicated", "concurrent"],
  storage_providers: ["s3", "azure", "gcs"],
  protos: ["tcp", "udp"],
  channel_kinds: [
    {
      name: "email",
      title: "Email",
      fields: [
        { name: "host", label: "SMTP host", input: "text", required: true, choices: [], secret: false, default: null },
        { name: "port", label: "Port", input: "number", required: false, choices: [], secret: false, default: "587" },
        { name: "security", label: "Security", input: "select", required: false, choices: ["starttls", "tls", "none"], secret: false, default: "starttls" },
        { name: "password", label: "Password", input: "password", required: false, choices: [], secret: true, default: null },
        { name: "from_address", label: "From", input: "email", required: true, choices: [], secret: false, default: null },
        { name: "to_addresses", label: "To (comma-separated)", input: "list", required: true, choices: [], secret: false, default: null },
      ],
    },
    { name: "slack", title: "Slack", fields: [{ name: "url", label: "Slack webhook URL", input: "url", required: true, choices: [], secret: true, default: null }] },
    { name: "webhook", title: "Webhook", fields: [{ name: "url", label: "Webhook URL", input: "url", required: true, choices: [], secret: false, default: null }] },
    {
      name: "pagerduty",
      title: "PagerDuty",
      fields: [
        { name: "routing_key", label: "Routing key", input: "password", required: true, choices: [], secret: true, default: null },
        { name: "events_url", label: "Events API URL", input: "url", required: false, choices: [], secret: false, default: "https://events.pagerduty.com/v2/enqueue" },
      ],
    },
  ],
  alert_metrics: CATALOG,
  export_kinds: ["mesh", "quorum", "storage", "throughput"],
  export_levels: ["region", "pair"],
};

const H = 3_600_000;
export const T0 = Date.parse("2026-11-20T00:00:00Z");

export const BACKTEST = {
  from: new Date(T0).toISOString(),
  to: new Date(T0 + 168 * H).toISOString(),
  window_s: 60,
  draw_step_s: 3600,
  count: 2,
  firings: [
    { start: new Date(T0 + 10 * H).toISOString(), end: new Date(T0 + 11 * H).toISOString(), series: [{ key: "a1|a2", name: "aws-use1-a-1 → aws-euw1-a-1" }], peak: 91_000 },
    { start: new Date(T0 + 100 * H).toISOString(), end: null, series: [{ key: "a1|a2", name: "aws-use1-a-1 → aws-euw1-a-1" }], peak: 120_500 },
  ],
  series: [
    {
      key: "a1|a2",
      name: "aws-use1-a-1 → aws-euw1-a-1",
      labels: {},
      breaches: 61,
      windows: Array.from({ length: 168 }, (_, i) => ({
        start: new Date(T0 + i * H).toISOString(),
        value: i === 10 || i >= 100 ? 95_000 : 68_000,
        threshold: 80_000,
        breach: i === 10 || i >= 100,
      })),
    },
  ],
  series_total: 1,
  source: {},
  notes: [],
  elapsed_ms: 12,
};

export function rule(over: Record<string, unknown> = {}) {
  return {
    id: "r1",
    org_id: "o1",
    name: "EU p99",
    description: "",
    severity: "critical",
    labels: { team: "net" },
    enabled: true,
    metric: "mesh_rtt",
    statistic: "p99",
    scope: { src: ["a1"], dst: ["a2"] },
    window_s: 60,
    condition: { type: "above", value: 80_000 },
    x: 1,
    y: 1,
    n: 1,
    m: null,
    channel_ids: [],
    reminder_interval_s: null,
    created_by: null,
    created_at: "2026-11-23T10:00:00Z",
    updated_at: "2026-11-23T10:00:00Z",
    evaluated_until: null,
    firing: 0,
    ...over,
  };
}

export function alert(over: Record<string, unknown> = {}) {
  const series = [
    {
      key: "a1|a2",
      name: "aws-use1-a-1 → aws-euw1-a-1",
      src: { id: "a1", name: "aws-use1-a-1" },
      dst: { id: "a2", name: "aws-euw1-a-1" },
      value: 95_000,
      threshold: 80_000,
      baseline: null,
      values: [
        { start: "2026-11-23T18:00:00Z", value: 70_000, threshold: 80_000, breach: false },
        { start: "2026-11-23T18:01:00Z", value: 95_000, threshold: 80_000, breach: true },
      ],
    },
  ];
  return {
    id: "al1",
    rule_id: "r1",
    rule_name: "EU p99",
    severity: "critical",
    labels: { team: "net" },
    metric: "mesh_rtt",
    statistic: "p99",
    unit: "us",
    group_key: "a1|a2",
    state: "firing",
    started_at: "2026-11-23T18:01:00Z",
    resolved_at: null,
    // As the API lists them: the series without their windows, which stay in the evidence.
    series: series.map(({ values: _values, ...rest }) => rest),
    dashboard_path: "/pair?level=node&src=a1&dst=a2&from=2026-11-23T17:50:00%2B00:00&to=2026-11-23T18:12:00%2B00:00",
    evidence: { unit: "us", statistic: "p99", value: 95_000, threshold: 80_000, baseline: null, series, agreeing: 1, time_range: { from: "2026-11-23T18:01:00Z", to: "2026-11-23T18:02:00Z" } },
    ...over,
  };
}
