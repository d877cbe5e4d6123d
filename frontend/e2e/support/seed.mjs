// Seeds an org through the public API only: enrolls agents with the enrollment token and
// posts gzip'd columnar batches exactly as docs/api.md specifies (mesh, quorum, storage).
// The data is synthetic but shaped like the seeds: per-class RTT levels (seed 003 Fig. 3),
// lognormal jitter with rare large spikes, losses, and a level shift on one cross-region pair.
import { randomUUID } from "node:crypto";
import { gzipSync } from "node:zlib";

/** A deterministic PRNG so screenshots and benches see the same data every run. */
export function rng(seed = 42) {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const normal = () => {
    const u = Math.max(next(), 1e-12);
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * next());
  };
  return { next, normal };
}

// One-way base RTTs between regions in microseconds (order of public inter-region pings).
const REGION_RTT_US = {
  "us-east-1|eu-west-1": 68_000,
  "us-east-1|us-west-2": 62_000,
  "us-east-1|ap-northeast-1": 148_000,
  "eu-west-1|us-west-2": 125_000,
  "eu-west-1|ap-northeast-1": 205_000,
  "us-west-2|ap-northeast-1": 98_000,
};

function regionKey(r) {
  // Providers name the same metro differently; map them to a common location.
  const m = {
    "us-east-1": "us-east-1", "us-east4": "us-east-1", eastus: "us-east-1",
    "eu-west-1": "eu-west-1", "europe-west1": "eu-west-1", northeurope: "eu-west-1",
    "us-west-2": "us-west-2", "us-west1": "us-west-2", westus2: "us-west-2",
    "ap-northeast-1": "ap-northeast-1", "asia-northeast1": "ap-northeast-1", japaneast: "ap-northeast-1",
  };
  return m[r] ?? r;
}

export function baseRttUs(a, b) {
  if (a.name === b.name) return 55;
  const ra = regionKey(a.region);
  const rb = regionKey(b.region);
  if (ra !== rb) {
    const v = REGION_RTT_US[`${ra}|${rb}`] ?? REGION_RTT_US[`${rb}|${ra}`] ?? 90_000;
    return v + (a.provider !== b.provider ? 2_500 : 0);
  }
  if (a.provider !== b.provider) return 1_900;
  if (a.zone !== b.zone) return 720;
  if (a.subnet !== b.subnet) return 260;
  return 170;
}

/** 6 agents in 3 regions covering every topology class. */
export function smallFleet() {
  return [
    { name: "aws-use1-a-1", provider: "aws", region: "us-east-1", zone: "us-east-1a", subnet: "subnet-a1" },
    { name: "aws-use1-a-2", provider: "aws", region: "us-east-1", zone: "us-east-1a", subnet: "subnet-a2" },
    { name: "aws-euw1-a-1", provider: "aws", region: "eu-west-1", zone: "eu-west-1a", subnet: "subnet-e1" },
    { name: "aws-euw1-b-1", provider: "aws", region: "eu-west-1", zone: "eu-west-1b", subnet: "subnet-e2" },
    { name: "gcp-ane1-a-1", provider: "gcp", region: "asia-northeast1", zone: "asia-northeast1-a", subnet: "default" },
    { name: "gcp-ane1-a-2", provider: "gcp", region: "asia-northeast1", zone: "asia-northeast1-a", subnet: "default" },
  ];
}

/** 3 providers × 4 regions × 2 zones = 24 agents (the bench fleet). */
export function benchFleet() {
  const providers = {
    aws: ["us-east-1", "eu-west-1", "us-west-2", "ap-northeast-1"],
    gcp: ["us-east4", "europe-west1", "us-west1", "asia-northeast1"],
    azure: ["eastus", "northeurope", "westus2", "japaneast"],
  };
  const out = [];
  for (const [provider, regions] of Object.entries(providers)) {
    for (const region of regions) {
      for (const z of ["a", "b"]) {
        const zone = provider === "azure" ? `${region}-${z === "a" ? 1 : 2}` : provider === "gcp" ? `${region}-${z}` : `${region}${z}`;
        out.push({ name: `${provider}-${region}-${z}`, provider, region, zone, subnet: `${zone}-net` });
      }
    }
  }
  return out;
}

// A connection the server closed while idle can fail the request reusing it (a keep-alive race):
// such a request (almost always) never reached the server, so it is sent again on a new one.
const REUSED_SOCKET_CLOSED = new Set(["UND_ERR_SOCKET", "ECONNRESET", "EPIPE"]);

async function http(url, opts = {}) {
  let res;
  for (let attempt = 1; ; attempt++) {
    try {
      res = await fetch(url, opts);
      break;
    } catch (e) {
      const code = e.cause?.code;
      if (attempt < 3 && REUSED_SOCKET_CLOSED.has(code)) continue;
      throw new Error(`${opts.method ?? "GET"} ${url}: ${e.message} (${code ?? e.cause?.message ?? "no cause"})`, { cause: e });
    }
  }
  const text = await res.text();
  let body;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = text;
  }
  if (!res.ok) throw new Error(`${opts.method ?? "GET"} ${url} → ${res.status}: ${text.slice(0, 500)}`);
  return { status: res.status, body };
}

/** The quorum groups the server hands an agent (majority of its zone; one agent per zone of its region). */
export function quorumGroups(me, agents) {
  const groups = [];
  const zone = agents.filter((a) => a.provider === me.provider && a.region === me.region && a.zone === me.zone).sort((a, b) => a.name.localeCompare(b.name));
  if (zone.length >= 2) groups.push({ name: "zone-majority", k: Math.floor(zone.length / 2) + 1, members: zone.map((a) => a.id) });
  const byZone = new Map();
  for (const a of [...agents].sort((x, y) => x.name.localeCompare(y.name))) {
    if (a.provider === me.provider && a.region === me.region && a.zone !== me.zone && !byZone.has(a.zone)) byZone.set(a.zone, a);
  }
  if (byZone.size) {
    const members = [me, ...byZone.values()];
    groups.push({ name: "region-majority", k: Math.floor(members.length / 2) + 1, members: members.map((a) => a.id) });
  }
  return groups;
}

export async function enroll(baseUrl, enrollmentToken, fleet) {
  const out = [];
  for (const [i, a] of fleet.entries()) {
    const { body } = await http(`${baseUrl}/api/v1/agents/enroll`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        enrollment_token: enrollmentToken,
        name: a.name,
        agent_version: "0.1.0",
        mesh_address: `10.${i >> 8}.${i & 255}.5:7300`,
        metadata: { provider: a.provider, region: a.region, zone: a.zone, subnet: a.subnet, instance_type: "c5.large", private_ip: `10.${i >> 8}.${i & 255}.5`, public_ip: "" },
      }),
    });
    out.push({ ...a, id: body.agent_id, token: body.agent_token });
  }
  return out;
}

export async function postBatch(baseUrl, agent, batch) {
  const body = gzipSync(Buffer.from(JSON.stringify({ batch_id: randomUUID(), agent_id: agent.id, ...batch })));
  for (let attempt = 0; ; attempt++) {
    let res;
    try {
      res = await fetch(`${baseUrl}/api/v1/ingest/batches`, {
        method: "POST",
        headers: { "content-type": "application/json", "content-encoding": "gzip", authorization: `Bearer ${agent.token}` },
        body,
      });
    } catch (e) {
      // A dropped keep-alive connection: resend, the batch id makes it idempotent.
      if (attempt < 5) {
        await new Promise((r) => setTimeout(r, 200 * (attempt + 1)));
        continue;
      }
      throw e;
    }
    if ((res.status === 429 || res.status === 503) && attempt < 20) {
      const wait = Number(res.headers.get("retry-after") ?? "1");
      await new Promise((r) => setTimeout(r, Math.min(wait, 5) * 1000));
      continue;
    }
    const text = await res.text();
    if (res.status !== 202 && res.status !== 200) throw new Error(`ingest ${res.status}: ${text.slice(0, 800)}`);
    return JSON.parse(text);
  }
}

/**
 * Mesh rounds for every agent to every agent (self included), from startMs to endMs every
 * intervalMs, posted in batches of at most maxSamples. Returns the number of samples.
 * Each sender also reports the quorum latency of its groups (k-th fastest reply).
 * @param {{ shiftPair?: [string, string], shiftUs?: number, lossRate?: number, payloads?: number[], concurrency?: number, maxSamples?: number, onProgress?: (n: number) => void }} opts
 */
export async function seedMesh(baseUrl, agents, startMs, endMs, intervalMs, opts = {}) {
  const r = rng(7);
  const lossRate = opts.lossRate ?? 0.002;
  const payloads = opts.payloads ?? [1024];
  const maxSamples = opts.maxSamples ?? 20_000;
  const mid = startMs + (endMs - startMs) / 2;
  const shift = opts.shiftPair;
  const shiftUs = opts.shiftUs ?? 1_500;
  const byName = new Map(agents.map((a) => [a.name, a]));
  const rounds = Math.floor((endMs - startMs) / intervalMs);
  const perRound = agents.length;
  const roundsPerBatch = Math.max(1, Math.floor(maxSamples / perRound));
  let total = 0;
  const rtt = (a, b, t, payload) => {
    let base = baseRttUs(a, b);
    // Payload adds serialisation time, about 8 ns per byte each way on a 1 Gbit/s path.
    base += (payload - 1024) * 0.016;
    // A slow daily cycle (seed 003 Lesson 4) of ±2% on cross-region links.
    if (base > 10_000) base *= 1 + 0.02 * Math.sin((2 * Math.PI * t) / 86_400_000);
    if (shift && a.name === shift[0] && b.name === shift[1] && t >= mid) base += shiftUs;
    if (shift && a.name === shift[0] && b.name === shift[1] && t >= mid + (endMs - mid) / 2) base -= shiftUs * 0.6;
    const sigma = base > 10_000 ? 0.01 : 0.18;
    let v = base * Math.exp(sigma * r.normal());
    if (r.next() < 0.0005) v *= 5 + 20 * r.next(); // rare spikes make the tail
    return Math.max(1, Math.round(v));
  };

  const jobs = [];
  for (const src of agents) {
    for (let r0 = 0; r0 < rounds; r0 += roundsPerBatch) {
      jobs.push({ src, r0, r1: Math.min(rounds, r0 + roundsPerBatch) });
    }
  }
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const { src, r0, r1 } = jobs[next++];
      const mesh = { peers: agents.map((a) => a.id), time_us: [], peer_idx: [], round: [], payload_bytes: [], rtt_us: [], status: [] };
      const groups = quorumGroups(src, agents);
      const q = groups.length ? { groups: groups.map((g) => g.name), time_us: [], group_idx: [], round: [], k: [], n: [], latency_us: [], status: [] } : null;
      for (let round = r0; round < r1; round++) {
        const t = startMs + round * intervalMs + (src.name.length % 7) * 3;
        const payload = payloads[round % payloads.length];
        const reply = new Map();
        for (const [j, dst] of agents.entries()) {
          const lost = r.next() < lossRate;
          const v = lost ? null : rtt(src, dst, t, payload);
          mesh.time_us.push(t * 1000 + j);
          mesh.peer_idx.push(j);
          mesh.round.push(round + 1);
          mesh.payload_bytes.push(payload);
          mesh.rtt_us.push(v);
          mesh.status.push(lost ? 1 : 0);
          reply.set(dst.id, v);
        }
        for (const [gi, g] of groups.entries()) {
          const ok = g.members.map((id) => reply.get(id)).filter((x) => x !== null && x !== undefined).sort((x, y) => x - y);
          const lat = ok.length >= g.k ? ok[g.k - 1] : null;
          q.time_us.push(t * 1000);
          q.group_idx.push(gi);
          q.round.push(round + 1);
          q.k.push(g.k);
          q.n.push(g.members.length);
          q.latency_us.push(lat);
          q.status.push(lat === null ? 1 : 0);
        }
      }
      await postBatch(baseUrl, src, q ? { mesh, quorum: q } : { mesh });
      total += mesh.time_us.length;
      opts.onProgress?.(total);
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency ?? 3 }, worker));
  return total;
}

// Median PUT/GET latencies in ms for 1 kB objects and the per-MB slope, per provider,
// roughly the order of seed 000 Tables 1-2 (storage from a nearby VM is faster today).
const STORAGE_PROFILE = {
  s3: { put_ms: 38, get_ms: 22, per_mb_ms: 14, rtt_ms: 1.2, fail: 0.004 },
  azure: { put_ms: 30, get_ms: 18, per_mb_ms: 18, rtt_ms: 1.6, fail: 0.002 },
  gcs: { put_ms: 55, get_ms: 28, per_mb_ms: 11, rtt_ms: 2.1, fail: 0.006 },
};

/**
 * Storage samples: PUT then GET of each size every intervalMs for each target, with
 * gzip9 and replicated variants, read-after-write probes and a concurrency sweep.
 * @param {{ id: string, provider: string }[]} targets
 */
export async function seedStorage(baseUrl, agent, targets, startMs, endMs, intervalMs) {
  if (targets.length === 0) return 0;
  const r = rng(11);
  const sizes = [1024, 10 * 1024, 100 * 1024, 1024 * 1024, 10 * 1024 * 1024];
  const cols = ["time_us", "target_idx", "op", "variant", "content", "size_bytes", "stored_bytes", "copies", "concurrency", "attempt", "latency_us", "ttfb_us", "rtt_us", "bytes_per_s", "status", "error_class"];
  let s = Object.fromEntries(cols.map((c) => [c, []]));
  let total = 0;
  const flush = async () => {
    if (!s.time_us.length) return;
    await postBatch(baseUrl, agent, { storage: { targets: targets.map((t) => t.id), ...s } });
    total += s.time_us.length;
    s = Object.fromEntries(cols.map((c) => [c, []]));
  };
  const push = (row) => {
    for (const c of cols) s[c].push(row[c] ?? null);
  };
  for (let t = startMs; t < endMs; t += intervalMs) {
    const day = Math.floor(t / 86_400_000);
    for (const [ti, target] of targets.entries()) {
      const p = STORAGE_PROFILE[target.provider] ?? STORAGE_PROFILE.s3;
      const dayFactor = 1 + 0.15 * Math.sin(day * 1.7 + ti);
      let tt = t * 1000;
      for (const size of sizes) {
        for (const op of ["put", "get"]) {
          for (const variant of ["plain", "gzip9"]) {
            const rtt = p.rtt_ms * 1000 * Math.exp(0.1 * r.normal());
            const base = (op === "put" ? p.put_ms : p.get_ms) * 1000 + (size / 1048576) * p.per_mb_ms * 1000 * (variant === "gzip9" ? 0.45 : 1);
            const fail = r.next() < p.fail;
            const lat = fail ? null : Math.round(base * dayFactor * Math.exp(0.25 * r.normal()) + rtt + (variant === "gzip9" ? size * 0.004 : 0));
            push({ time_us: tt++, target_idx: ti, op, variant, content: "binary", size_bytes: size, stored_bytes: variant === "gzip9" ? Math.round(size * 0.75) : size, copies: 1, concurrency: 1, attempt: 1, latency_us: lat, ttfb_us: lat === null ? null : Math.round(lat * 0.6), rtt_us: Math.round(rtt), status: fail ? 1 : 0, error_class: fail ? "timeout" : null });
          }
        }
      }
      // Replication: F copies, each copy's GET, then the first-of-k for k = 1..F.
      const copies = [];
      for (let c = 0; c < 3; c++) copies.push(Math.round(p.get_ms * 1000 * Math.exp(0.35 * r.normal())));
      for (let k = 1; k <= 3; k++) {
        const first = Math.min(...copies.slice(0, k));
        push({ time_us: tt++, target_idx: ti, op: "get_first", variant: "replicated", content: "binary", size_bytes: 1024, stored_bytes: 1024, copies: k, concurrency: 1, attempt: 1, latency_us: first, ttfb_us: null, rtt_us: null, bytes_per_s: null, status: 0 });
      }
      push({ time_us: tt++, target_idx: ti, op: "read_after_write", variant: "plain", content: "binary", size_bytes: 1024, stored_bytes: 1024, copies: 1, concurrency: 1, attempt: 1, latency_us: Math.round(p.get_ms * 1000 * (1 + 2 * r.next())), status: 0 });
      for (const c of [1, 2, 4, 8, 16, 32]) {
        const bps = 60e6 * Math.min(c, 12) ** 0.85 * Math.exp(0.1 * r.normal());
        push({ time_us: tt++, target_idx: ti, op: "get", variant: "concurrent", content: "binary", size_bytes: 1024 * 1024, stored_bytes: 1024 * 1024, copies: 1, concurrency: c, attempt: 1, latency_us: Math.round((1048576 * c) / bps * 1e6), bytes_per_s: bps, status: 0 });
      }
    }
    if (s.time_us.length > 15_000) await flush();
  }
  await flush();
  return total;
}

/**
 * Creates storage targets through the REST API with an API key (anonymous credentials: the
 * samples are posted by the seeder, nothing probes the endpoints).
 * @param {{ name: string, provider: "s3" | "azure" | "gcs" }[]} specs
 */
export async function createStorageTargets(baseUrl, apiKey, specs) {
  const out = [];
  for (const s of specs) {
    const res = await fetch(`${baseUrl}/api/v1/storage-targets`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({
        name: s.name,
        provider: s.provider,
        bucket: "stormwatch-probe",
        endpoint: `https://${s.name}.storage.invalid`,
        credentials: { source: "none" },
        contents: ["binary"],
        // Agents write samples only for targets assigned to them.
        assign_all: true,
        variants: {
          gzip9: { enabled: true, contents: ["binary"] },
          replication: { enabled: true, copies: 3 },
          consistency: { enabled: true },
          concurrency: { enabled: true, levels: [1, 2, 4, 8, 16, 32], size_bytes: 1048576 },
        },
      }),
    });
    if (!res.ok) throw new Error(`create storage target ${res.status}: ${(await res.text()).slice(0, 500)}`);
    const body = await res.json();
    out.push({ id: body.id, provider: s.provider, name: s.name });
  }
  return out;
}

/** Posts path traces of one agent (POST /api/v1/ingest/paths, docs/paths.md). Each trace is
 * { dst, atMs, routers: [address | null, ...], stepUs }: hops at stepUs more each, then the
 * destination. */
export async function postTraces(baseUrl, agent, traces) {
  const body = {
    traces: traces.map((t) => {
      const hop = (ttl, addr, reached = false) =>
        addr === null
          ? { ttl, addrs: [], sent: 3, lost: 3 }
          : { ttl, addrs: [addr], sent: 3, lost: 0, rtt_min_us: ttl * t.stepUs - 50, rtt_med_us: ttl * t.stepUs, rtt_max_us: ttl * t.stepUs + 80, reached };
      const hops = t.routers.map((a, i) => hop(i + 1, a));
      hops.push(hop(hops.length + 1, t.dstAddress ?? "203.0.113.9", true));
      return {
        id: randomUUID(), dst_agent_id: t.dst.id, dst_address: t.dstAddress ?? "203.0.113.9", started_at: new Date(t.atMs).toISOString(),
        proto: "tcp", trigger: "schedule", reached: true, elapsed_ms: 40, hops,
      };
    }),
  };
  const res = await fetch(`${baseUrl}/api/v1/ingest/paths`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${agent.token}` },
    body: JSON.stringify(body),
  });
  if (res.status !== 202) throw new Error(`POST /ingest/paths: ${res.status} ${await res.text()}`);
  return res.json();
}
