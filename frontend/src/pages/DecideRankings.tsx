import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { getRankings, type RankingQuery } from "../api/advisors";
import { useVocabularies } from "../api/vocabularies";
import { DecidePage } from "../components/decide/Layout";
import { Missing, num } from "../components/decide/Terms";
import { Card, ErrorState, Loading } from "../components/common/State";
import { formatBitsPerS, formatCount, formatMs, formatPercent } from "../lib/format";

const METHOD: Record<string, string> = {
  normal: "mean ± 1.96 σ/√n",
  order_statistic: "order statistics (raw samples)",
  order_statistic_sketch: "order statistics on the sketch, ±1%",
  chi_square: "chi-square on the variance",
  wilson: "Wilson score",
};

export default function DecideRankings() {
  const [q, setQ] = useState<RankingQuery>({ kind: "mesh", level: "region_pair", stat: "p50" });
  const [op, setOp] = useState("get");
  const vocab = useVocabularies().data;
  const query: RankingQuery = q.kind === "storage" ? { ...q, op } : q;
  const res = useQuery({ queryKey: ["rankings", query], queryFn: ({ signal }) => getRankings(query, signal) });
  const out = res.data;
  const fmt = (v: number | null | undefined) => (q.stat === "loss_rate" ? formatPercent(v) : out?.unit === "bytes_per_s" ? formatBitsPerS(v) : formatMs(v));
  return (
    <DecidePage title="rankings" current="/decide/rankings">
      <Card title="Rank by a measured statistic" note="each figure with its 95% confidence interval">
        <form className="field-row" aria-label="Ranking inputs" onSubmit={(e) => e.preventDefault()}>
          <label>
            Measurements
            <select value={q.kind} onChange={(e) => setQ({ ...q, kind: e.target.value as RankingQuery["kind"] })}>
              <option value="mesh">network RTT</option>
              <option value="storage">storage latency</option>
              <option value="throughput">throughput</option>
            </select>
          </label>
          <label>
            Rank
            <select value={q.level} onChange={(e) => setQ({ ...q, level: e.target.value as RankingQuery["level"] })}>
              <option value="provider">providers</option>
              <option value="region">regions</option>
              <option value="region_pair">region pairs</option>
              <option value="pair">agent pairs / targets</option>
            </select>
          </label>
          <label>
            By
            <select value={q.stat} onChange={(e) => setQ({ ...q, stat: e.target.value })}>
              {(vocab?.statistics ?? [q.stat]).map((s) => (
                <option key={s}>{s}</option>
              ))}
            </select>
          </label>
          {q.kind === "storage" && (
            <label>
              Operation
              <select value={op} onChange={(e) => setOp(e.target.value)}>
                {(vocab?.storage_ops ?? [op]).map((o) => (
                  <option key={o}>{o}</option>
                ))}
              </select>
            </label>
          )}
        </form>
        {res.isPending && <Loading />}
        {res.error && <ErrorState error={res.error} onRetry={() => void res.refetch()} />}
        {out && <Missing items={out.missing ?? []} />}
        {out && out.rows.length > 0 && (
          <>
            <table className="data" aria-label="Ranking">
              <thead>
                <tr>
                  <th>rank</th>
                  <th>{q.level.replace("_", " ")}</th>
                  <th>{q.stat}</th>
                  <th>95% interval</th>
                  <th>samples</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {out.rows.map((r) => (
                  <tr key={r.key}>
                    <td>{r.rank ?? "–"}</td>
                    <th scope="row">{r.key}</th>
                    <td>{fmt(r.value)}</td>
                    <td>
                      {fmt(r.ci_low)} – {fmt(r.ci_high)}
                    </td>
                    <td>{formatCount(r.samples)}</td>
                    <td>{r.overlaps_previous ? <span className="badge warn">tied with the one above</span> : ""}</td>
                  </tr>
                ))}
              </tbody>
            </table>
            <p className="muted">
              Intervals: {[...new Set(out.rows.map((r) => r.ci_method).filter(Boolean))].map((m) => METHOD[m as string] ?? m).join("; ")}. Data: {out.source.resolution}, {num(out.rows.length)} entries.
            </p>
          </>
        )}
      </Card>
    </DecidePage>
  );
}
