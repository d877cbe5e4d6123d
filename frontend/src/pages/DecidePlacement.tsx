import { useMutation, useQuery } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { advisePlacement, getPlacement, type PlacementOut } from "../api/advisors";
import { useAgents } from "../api/agents";
import { CheckList, DecidePage, NumberField, RunState } from "../components/decide/Layout";
import { Missing, Verdict, num } from "../components/decide/Terms";
import { Card, Loading } from "../components/common/State";
import { formatBitsPerS, formatBytes, formatMs, formatPercent } from "../lib/format";

const POLICY_LABEL: Record<string, string> = {
  random: "random",
  two_random: "two-random",
  local: "local",
  local_closest: "local-closest",
  local_farthest: "local-farthest",
};

function Result({ out }: { out: PlacementOut }) {
  const r = out.result;
  if (!r) return null;
  const ranked = [...r.policies].sort((a, b) => a.download_rank - b.download_rank);
  const best = ranked[0];
  if (!best) return null;
  return (
    <Card title="Expected times per policy" note={`${r.trials} Monte Carlo trials, ${r.blocks} blocks of ${formatBytes(r.block_bytes)}, ${r.concurrency === 1 ? "one after another" : `${Math.min(r.concurrency, r.blocks)} in flight`}; each block read from its nearest replica`}>
      <Verdict good={null}>
        Fastest download: {POLICY_LABEL[best.policy]} ({formatMs(best.download_ms)} ± {formatMs(best.download_std_ms)})
      </Verdict>
      <table className="data" aria-label="Placement policies">
        <thead>
          <tr>
            <th>rank</th>
            <th>policy</th>
            <th>download</th>
            <th>σ download</th>
            <th>p90 download</th>
            <th>upload</th>
            <th>σ upload</th>
            <th>blocks read in {r.downloader}</th>
          </tr>
        </thead>
        <tbody>
          {ranked.map((p) => (
            <tr key={p.policy}>
              <td>{p.download_rank}</td>
              <th scope="row">{POLICY_LABEL[p.policy]}</th>
              <td>{formatMs(p.download_ms)}</td>
              <td>{formatMs(p.download_std_ms)}</td>
              <td>{formatMs(p.download_p90_ms)}</td>
              <td>{formatMs(p.upload_ms)}</td>
              <td>{formatMs(p.upload_std_ms)}</td>
              <td>{formatPercent(p.blocks_read_in_downloader_region)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <p className="muted">
        {out.cached ? "Cached answer." : `Computed by the ${out.computed_by ?? "api"}.`} {r.throughput_measured ? "Measured TCP throughput adds block transfer time." : "No throughput measured: each block costs its round trip."}
      </p>
    </Card>
  );
}

function Matrix({ out, regions }: { out: PlacementOut; regions: string[] }) {
  const d = out.data;
  if (!d) return null;
  return (
    <Card title="Data behind it" note={`mesh RTT from ${d.source.resolution} samples`}>
      <table className="data" aria-label="Measured RTT matrix">
        <thead>
          <tr>
            <th>from \ to</th>
            {regions.map((r) => (
              <th key={r}>{r}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {regions.map((a, i) => (
            <tr key={a}>
              <th scope="row">{a}</th>
              {regions.map((b, j) => {
                const rtt = d.rtt_mean_ms[i]?.[j] ?? null;
                return (
                  <td key={b} title={`${d.samples[i]?.[j] ?? 0} samples; throughput ${formatBitsPerS((d.throughput_bps[i]?.[j] ?? NaN) / 8)}`}>
                    {rtt === null ? "–" : `${num(rtt, 4)} ms`}
                  </td>
                );
              })}
            </tr>
          ))}
        </tbody>
      </table>
      {d.notes.map((n) => (
        <p key={n} className="muted">
          {n}
        </p>
      ))}
    </Card>
  );
}

export default function DecidePlacement() {
  const agents = useAgents();
  const allRegions = [...new Set((agents.data ?? []).map((a) => a.region).filter((r): r is string => Boolean(r)))].sort();
  const [picked, setPicked] = useState<string[] | null>(null);
  const regions = picked ?? allRegions;
  const [uploader, setUploader] = useState("");
  const [downloader, setDownloader] = useState("");
  const [fileKiB, setFileKiB] = useState("1024");
  const [blockKiB, setBlockKiB] = useState("64");
  const [trials, setTrials] = useState("10000");
  // A real client keeps several blocks in flight; 16 reads seed 001's 1 MB files of 64 KB at once.
  const [concurrency, setConcurrency] = useState("16");
  const up = regions.includes(uploader) ? uploader : regions[0] ?? "";
  const down = regions.includes(downloader) ? downloader : regions[0] ?? "";
  const run = useMutation({ mutationFn: advisePlacement });
  const pendingHash = run.data?.status === "pending" ? run.data.input_hash : null;
  const poll = useQuery({
    queryKey: ["placement", pendingHash],
    queryFn: ({ signal }) => getPlacement(pendingHash ?? "", signal),
    enabled: pendingHash !== null,
    refetchInterval: (q) => (q.state.data?.status === "pending" ? 500 : false),
  });
  const out = pendingHash ? poll.data : run.data;

  function submit(e: FormEvent) {
    e.preventDefault();
    run.mutate({
      regions,
      uploader: up,
      downloader: down,
      file_bytes: Math.round(Number(fileKiB) * 1024),
      block_bytes: Math.round(Number(blockKiB) * 1024),
      trials: Number(trials),
      seed: 1,
      concurrency: Number(concurrency),
    });
  }
  function toggle(r: string) {
    const cur = new Set(regions);
    if (cur.has(r)) cur.delete(r);
    else cur.add(r);
    setPicked(allRegions.filter((x) => cur.has(x)));
  }
  return (
    <DecidePage title="block placement" current="/decide/placement">
      <Card title="Where should blocks go?" note="seed 001: random, two-random, local, local-closest, local-farthest over your measured RTT matrix">
        {agents.isPending ? (
          <Loading />
        ) : (
          <form onSubmit={submit} aria-label="Placement inputs">
            <CheckList legend="Regions" options={allRegions.map((r) => ({ value: r, label: r }))} checked={regions} onToggle={toggle} />
            <div className="field-row">
              <label>
                Uploader
                <select value={up} onChange={(e) => setUploader(e.target.value)}>
                  {regions.map((r) => (
                    <option key={r}>{r}</option>
                  ))}
                </select>
              </label>
              <label>
                Downloader
                <select value={down} onChange={(e) => setDownloader(e.target.value)}>
                  {regions.map((r) => (
                    <option key={r}>{r}</option>
                  ))}
                </select>
              </label>
              <NumberField label="File size (KiB)" min="1" step="1" value={fileKiB} onChange={setFileKiB} />
              <NumberField label="Block size (KiB)" min="1" step="1" value={blockKiB} onChange={setBlockKiB} />
              <NumberField label="Blocks in flight (1: one after another)" min="1" max="1024" step="1" value={concurrency} onChange={setConcurrency} />
              <NumberField label="Trials" min="1" max="100000" step="1" value={trials} onChange={setTrials} />
              <button type="submit" className="primary" disabled={regions.length < 2 || run.isPending}>
                Simulate
              </button>
            </div>
          </form>
        )}
        <RunState pending={run.isPending || out?.status === "pending"} error={run.error} what="Simulating" />
        {out?.status === "failed" && (
          <p className="state error" role="alert">
            {out.error}
          </p>
        )}
        {out && <Missing items={out.missing ?? []} />}
      </Card>
      {out?.result && <Result out={out} />}
      {out?.data && <Matrix out={out} regions={out.result?.regions ?? run.variables?.regions ?? regions} />}
    </DecidePage>
  );
}
