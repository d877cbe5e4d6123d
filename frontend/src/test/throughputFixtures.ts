// Throughput answers typed by the API's OpenAPI schema, so tsc fails when the API moves.
import type { components } from "../api/schema";

type S = components["schemas"];

export const START = Date.parse("2026-11-23T20:00:00Z");
const MB = 1e6 / 8; // bytes per second in one Mbit/s
const iso = (t: number) => new Date(t).toISOString();

export const SETTINGS: S["ThroughputSettingsPublic"] = {
  enabled: true,
  monthly_budget_bytes: 500e9,
  monthly_budget_usd: 10,
  price_per_gb_usd: null,
  default_duration_s: 300,
  default_proto: "tcp",
  streams: 4,
  udp_rate_bits_per_s: 500_000_000,
  udp_datagram_bytes: 1400,
  experiments_per_pair_per_day: 4,
  pairs: null,
  updated_at: "2026-11-01T00:00:00Z",
};

export const BUDGET: S["BudgetPublic"] = {
  month: "2026-11",
  budget_bytes: 500e9,
  used_bytes: 120e9,
  scheduled_bytes: 30e9,
  remaining_bytes: 350e9,
  used_cost_usd: 2.4,
  scheduled_cost_usd: 0.6,
  estimated_cost_usd: 3,
  budget_cost_usd: 10,
  refused: [{ pair: { src_agent_id: "a1", dst_agent_id: "a3" }, proto: "tcp", code: "budget_bytes", reason: "over the monthly budget", experiments: 2 }],
  refused_at: "2026-11-23T00:00:00Z",
};

/** Forward (a1 → a2): 850 Mbit/s for 100 s, then 400; reverse (a2 → a1): 800 flat. */
export function samples(durationS = 300, switchS = 100): S["ExperimentSamples"] {
  const fwd = Array.from({ length: durationS }, (_, i) => ({ time: iso(START + (i + 1) * 1000), offset_s: i + 1, bytes_per_s: (i < switchS ? 850 : 400) * MB, loss_ratio: null, jitter_us: null }));
  const rev = Array.from({ length: durationS }, (_, i) => ({ time: iso(START + (durationS + i + 1) * 1000), offset_s: i + 1, bytes_per_s: 800 * MB, loss_ratio: null, jitter_us: null }));
  return {
    experiment_id: "e1",
    directions: [
      { direction: "forward", src_agent_id: "a1", dst_agent_id: "a2", samples: fwd },
      { direction: "reverse", src_agent_id: "a2", dst_agent_id: "a1", samples: rev },
    ],
  };
}

const TRANSITION: S["Transition"] = { at: iso(START + 100_000), offset_s: 100, level_before_bytes_per_s: 850 * MB, level_after_bytes_per_s: 400 * MB, bytes_before: 850 * 100 * MB };

/** As the list answers: the experiment without its analysis. */
export function listed(over: Partial<S["ExperimentPublic"]> = {}): S["ExperimentPublic"] {
  return {
    id: "e1",
    initiator_agent_id: "a1",
    responder_agent_id: "a2",
    proto: "tcp",
    start_at: iso(START),
    end_at: iso(START + 600_000),
    duration_s: 300,
    streams: 4,
    udp_rate_bits_per_s: 500_000_000,
    udp_datagram_bytes: 1400,
    status: "done",
    est_bytes: 52e9,
    est_cost_usd: 1.04,
    origin: "scheduler",
    created_at: iso(START - 3_600_000),
    ...over,
  };
}

/** As GET /throughput/experiments/{id} answers: per direction stats with their transitions. */
export function experiment(over: Partial<S["ExperimentDetail"]> = {}): S["ExperimentDetail"] {
  return {
    ...listed(),
    asymmetry: 550 / 800,
    directions: [
      { direction: "forward", src_agent_id: "a1", dst_agent_id: "a2", seconds: 300, bytes: (850 * 100 + 400 * 200) * MB, mean_bytes_per_s: 550 * MB, max_bytes_per_s: 850 * MB, min_bytes_per_s: 400 * MB, std_bytes_per_s: 212 * MB, cov: 0.38, loss_ratio_mean: null, jitter_us_mean: null, jitter_us_max: null, transitions: [TRANSITION] },
      { direction: "reverse", src_agent_id: "a2", dst_agent_id: "a1", seconds: 300, bytes: 800 * 300 * MB, mean_bytes_per_s: 800 * MB, max_bytes_per_s: 800 * MB, min_bytes_per_s: 800 * MB, std_bytes_per_s: 0, cov: 0, loss_ratio_mean: null, jitter_us_mean: null, jitter_us_max: null, transitions: [] },
    ],
    ...over,
  };
}

const flow = (mean: number, std: number, n: number, reverse: number | null) => ({ mean_bytes_per_s: mean * MB, std_bytes_per_s: std * MB, cov: std / mean, experiments: n, reverse_mean_bytes_per_s: reverse === null ? null : reverse * MB, asymmetry: reverse === null ? null : mean / reverse });
const aws = (src: string, dst: string) => ({ src_provider: "aws", src_region: src, dst_provider: "aws", dst_region: dst });

export const PAIRS: S["PairsPublic"] = {
  start: "2026-11-16T21:00:00Z",
  end: "2026-11-23T21:00:00Z",
  region_pairs: [
    { ...aws("us-east-1", "eu-west-1"), proto: "tcp", ...flow(550, 40, 6, 800) },
    { ...aws("eu-west-1", "us-east-1"), proto: "tcp", ...flow(800, 8, 6, 550) },
    { ...aws("us-east-1", "eu-west-1"), proto: "udp", ...flow(480, 5, 2, null) },
  ],
  agent_pairs: [{ src_agent_id: "a1", dst_agent_id: "a2", proto: "tcp", ...flow(550, 40, 4, 800) }],
};

export const AZ_PAIRS: S["AzPairsPublic"] = {
  start: "2026-11-16T21:00:00Z",
  end: "2026-11-23T21:00:00Z",
  region_pairs: [
    {
      ...aws("us-east-1", "eu-west-1"),
      proto: "tcp",
      az_pairs: [
        { src_zone: "us-east-1a", dst_zone: "eu-west-1a", mean_bytes_per_s: 550 * MB, experiments: 4 },
        { src_zone: "us-east-1a", dst_zone: "eu-west-1b", mean_bytes_per_s: 700 * MB, experiments: 2 },
      ],
      comparisons: [{ a: { src_zone: "us-east-1a", dst_zone: "eu-west-1a" }, b: { src_zone: "us-east-1a", dst_zone: "eu-west-1b" }, slots: 2, cv_rmse: 0.21 }],
    },
  ],
};

export const DEGRADATIONS: S["DegradationsPublic"] = {
  start: "2026-11-16T21:00:00Z",
  end: "2026-11-23T21:00:00Z",
  fraction: 0.5,
  min_hours: 2,
  degradations: [
    { src_agent_id: "a1", dst_agent_id: "a3", src_region: "us-east-1", dst_region: "eu-west-1", proto: "tcp", start: "2026-11-22T02:00:00Z", end: "2026-11-22T07:00:00Z", duration_s: 18_000, level_bytes_per_s: 200 * MB, norm_bytes_per_s: 700 * MB, experiments: 5 },
  ],
};
