// Throughput answers shaped as THROUGHPUT_CONTRACT.md and the API's OpenAPI schema give them.
import { AGENTS } from "./fixtures";

export const START = Date.parse("2026-11-23T20:00:00Z");
const MB = 1e6 / 8; // bytes per second in one Mbit/s
const iso = (t: number) => new Date(t).toISOString();

export const SETTINGS = {
  enabled: true,
  monthly_budget_bytes: 500e9,
  price_per_gb_usd: null,
  default_duration_s: 300,
  default_proto: "tcp",
  streams: 4,
  udp_rate_bits_per_s: 500_000_000,
  udp_datagram_bytes: 1400,
  experiments_per_pair_per_day: 4,
  pairs: null,
};

export const BUDGET = {
  month: "2026-11",
  budget_bytes: 500e9,
  used_bytes: 120e9,
  scheduled_bytes: 30e9,
  remaining_bytes: 350e9,
  estimated_cost_usd: 3,
  budget_cost_usd: 10,
  refused: [{ pair: { src_agent_id: "a1", dst_agent_id: "a3", src_agent_name: "aws-use1-a-1", dst_agent_name: "aws-euw1-b-1" }, reason: "over the monthly budget" }],
};

/** Forward (a1 → a2): 850 Mbit/s for 100 s, then 400; reverse (a2 → a1): 800 flat. */
export function samples(durationS = 300, switchS = 100) {
  const fwd = Array.from({ length: durationS }, (_, i) => ({ time: iso(START + (i + 1) * 1000), bytes_per_s: (i < switchS ? 850 : 400) * MB, loss_ratio: null, jitter_us: null }));
  const rev = Array.from({ length: durationS }, (_, i) => ({ time: iso(START + (durationS + i + 1) * 1000), bytes_per_s: 800 * MB, loss_ratio: null, jitter_us: null }));
  return { experiment_id: "e1", directions: [{ direction: "forward", samples: fwd }, { direction: "reverse", samples: rev }] };
}

export function experiment(over: Record<string, unknown> = {}) {
  return {
    id: "e1",
    src_agent_id: "a1",
    dst_agent_id: "a2",
    src_agent_name: AGENTS[0]!.name,
    dst_agent_name: AGENTS[1]!.name,
    proto: "tcp",
    start_at: iso(START),
    duration_s: 300,
    status: "done",
    directions: [
      { direction: "forward", mean_bytes_per_s: 550 * MB, max_bytes_per_s: 850 * MB, min_bytes_per_s: 400 * MB, cov: 0.38, bytes: (850 * 100 + 400 * 200) * MB, samples: 300, loss_ratio: null, jitter_us: null },
      { direction: "reverse", mean_bytes_per_s: 800 * MB, max_bytes_per_s: 800 * MB, min_bytes_per_s: 800 * MB, cov: 0, bytes: 800 * 300 * MB, samples: 300, loss_ratio: null, jitter_us: null },
    ],
    transitions: [{ direction: "forward", at: iso(START + 100_000), offset_s: 100, level_before_bytes_per_s: 850 * MB, level_after_bytes_per_s: 400 * MB, bytes_before: 850 * 100 * MB }],
    ...over,
  };
}

export const PAIRS = {
  region_pairs: [
    { src_region: "us-east-1", dst_region: "eu-west-1", proto: "tcp", mean_bytes_per_s: 550 * MB, std_bytes_per_s: 40 * MB, cov: 0.073, experiments: 6, asymmetry: 0.69, forward_mean_bytes_per_s: 550 * MB, reverse_mean_bytes_per_s: 800 * MB },
    { src_region: "eu-west-1", dst_region: "us-east-1", proto: "tcp", mean_bytes_per_s: 800 * MB, std_bytes_per_s: 8 * MB, cov: 0.01, experiments: 6, asymmetry: 1.45, forward_mean_bytes_per_s: 800 * MB, reverse_mean_bytes_per_s: 550 * MB },
    { src_region: "us-east-1", dst_region: "eu-west-1", proto: "udp", mean_bytes_per_s: 480 * MB, std_bytes_per_s: 5 * MB, cov: 0.01, experiments: 2, asymmetry: 1, forward_mean_bytes_per_s: 480 * MB, reverse_mean_bytes_per_s: 480 * MB },
  ],
  agent_pairs: [
    { src_agent_id: "a1", dst_agent_id: "a2", src_agent_name: "aws-use1-a-1", dst_agent_name: "aws-euw1-a-1", src_region: "us-east-1", dst_region: "eu-west-1", proto: "tcp", mean_bytes_per_s: 550 * MB, std_bytes_per_s: 40 * MB, cov: 0.073, experiments: 4, asymmetry: 0.69 },
  ],
};

export const AZ_PAIRS = [
  {
    src_region: "us-east-1",
    dst_region: "eu-west-1",
    proto: "tcp",
    cv_rmse: 0.21,
    az_pairs: [
      { src_zone: "us-east-1a", dst_zone: "eu-west-1a", mean_bytes_per_s: 550 * MB, experiments: 4 },
      { src_zone: "us-east-1a", dst_zone: "eu-west-1b", mean_bytes_per_s: 700 * MB, experiments: 2 },
    ],
  },
];

export const DEGRADATIONS = [
  { src_agent_id: "a1", dst_agent_id: "a3", src_agent_name: "aws-use1-a-1", dst_agent_name: "aws-euw1-b-1", proto: "tcp", start: "2026-11-22T02:00:00Z", end: "2026-11-22T07:00:00Z", level_bytes_per_s: 200 * MB, norm_bytes_per_s: 700 * MB },
];
