import { useQuery } from "@tanstack/react-query";
import { listAlerts } from "../api/alerts";
import { SeverityBadge } from "../components/alerts/AlertList";
import { alertsOnPair } from "../lib/alertMarks";
import { useAgents } from "../api/agents";
import { getPairDistribution, getPairLevelShifts, getPairLossReasons, pairCsvUrl, getPairSummary, getPairTimeline, getQuorum, type PairQuery } from "../api/analytics";
import type { SummaryVM } from "../api/models";
import { follow } from "../components/common/Link";
import { CdfChart } from "../components/pair/CdfChart";
import { Histogram } from "../components/pair/Histogram";
import { LossReasons } from "../components/pair/LossReasons";
import { PathView } from "../components/pair/PathView";
import { Timeline } from "../components/pair/Timeline";
import { Async, Card, Empty, Loading } from "../components/common/State";
import { TimeRangePicker, useRange } from "../components/common/TimeRangePicker";
import { formatClock, formatCount, formatPercent, formatRatio, formatUs } from "../lib/format";
import { linkTo, useParams } from "../lib/router";
import { isWeak, supportNote } from "../lib/support";
import { windowSecondsFor } from "../lib/timeRange";
import { asLevel } from "./Overview";

const BUCKETS_US = [10, 50, 100, 500, 1000, 5000];

export function SummaryTable({ s }: { s: SummaryVM }) {
  return (
    <div className="scroll-x">
      <table className="data" aria-label="Summary statistics">
        <thead>
          <tr>
            <th>samples</th>
            <th>loss</th>
            <th>mean</th>
            <th>std dev</th>
            <th>CoV</th>
            <th>min</th>
            <th>max</th>
            <th>p99.99/mean</th>
            <th>max/mean</th>
          </tr>
        </thead>
        <tbody>
          <tr>
            <td>{formatCount(s.count)}</td>
            <td>{formatPercent(s.loss_rate)}</td>
            <td>{formatUs(s.mean_us)}</td>
            <td>{formatUs(s.std_us)}</td>
            <td>{formatRatio(s.cov)}</td>
            <td>{formatUs(s.min_us)}</td>
            <td>{formatUs(s.max_us)}</td>
            <td>{formatRatio(s.tail_mean_ratio)}</td>
            <td>{formatRatio(s.max_mean_ratio)}</td>
          </tr>
        </tbody>
      </table>
      <table className="data" aria-label="Percentiles" style={{ marginTop: 8 }}>
        <thead>
          <tr>
            {s.percentiles.map(([k]) => (
              <th key={k}>{k}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          <tr>
            {s.percentiles.map(([k, v]) => {
              const beyond = s.beyond[k];
              const weak = isWeak(beyond);
              return (
                <td key={k} className={weak ? "muted" : undefined} aria-disabled={weak || undefined} title={supportNote(beyond) || undefined}>
                  {formatUs(v)}
                </td>
              );
            })}
          </tr>
        </tbody>
      </table>
    </div>
  );
}

/** The value at a quantile of a CDF (for the histogram's overflow bucket). */
function cutoff(cdf: { x_us: number; p: number }[], q: number): number | undefined {
  return cdf.find((p) => p.p >= q)?.x_us;
}

export default function Pair() {
  const [params, set] = useParams();
  const level = asLevel(params.get("level"));
  const src = params.get("src");
  const dst = params.get("dst");
  const fullRange = params.get("y") === "full";
  const log = params.get("scale") !== "linear";
  const tail = params.get("tail") === "1";
  const bucketUs = Number(params.get("bucket_us") ?? "") || 0;
  const range = useRange();
  const windowS = windowSecondsFor(range.toMs - range.fromMs);
  const q = (): PairQuery => ({ ...range.window(), level, src: src ?? "", dst: dst ?? "" });
  const on = Boolean(src && dst);
  const pair = ["pair", range.key, level, src, dst] as const;
  const refetchInterval = range.refresh || false;

  const summary = useQuery({ queryKey: [...pair, "summary"], queryFn: ({ signal }) => getPairSummary(q(), signal), enabled: on, refetchInterval });
  const timeline = useQuery({ queryKey: [...pair, "timeline", windowS], queryFn: ({ signal }) => getPairTimeline(q(), windowS, signal), enabled: on, refetchInterval });
  const shifts = useQuery({ queryKey: [...pair, "level-shifts", windowS], queryFn: ({ signal }) => getPairLevelShifts(q(), windowS, signal), enabled: on, refetchInterval });
  const segs = shifts.data?.segments ?? [];
  const dist = useQuery({ queryKey: [...pair, "distribution", bucketUs], queryFn: ({ signal }) => getPairDistribution(q(), bucketUs || null, signal), enabled: on, refetchInterval });
  const csv = useQuery({ queryKey: [...pair, "csv-url", windowS], queryFn: () => pairCsvUrl(q(), windowS), enabled: on });
  const quorum = useQuery({ queryKey: [...pair, "quorum"], queryFn: ({ signal }) => getQuorum(q(), signal), enabled: on && level === "node", refetchInterval });
  // Agent names for the title whatever the entry path (a link may carry ids only); the
  // alert badges use the same list.
  const lossReasons = useQuery({ queryKey: [...pair, "loss-reasons"], queryFn: ({ signal }) => getPairLossReasons(q(), signal), enabled: on, refetchInterval });
  const agents = useAgents({ enabled: on });
  const nameOf = (id: string | null, label: string | null) => agents.data?.find((a) => a.id === id)?.name ?? label ?? id ?? "";
  const srcLabel = level === "node" ? nameOf(src, params.get("srcLabel")) : (params.get("srcLabel") ?? src ?? "");
  const dstLabel = level === "node" ? nameOf(dst, params.get("dstLabel")) : (params.get("dstLabel") ?? dst ?? "");
  const pct = (label: string) => summary.data?.percentiles.find(([k]) => k === label)?.[1] ?? null;
  const p1 = pct("p1");
  const p999 = pct("p99.9");
  const body: [number, number] | null = p1 !== null && p999 !== null ? [p1, p999] : null;
  // The default y-range fits the body, which comes with the summary: the timeline waits for it
  // (or its failure) instead of drawing at full range first and then jumping to the fit.
  const bodySettled = fullRange || summary.data !== undefined || summary.error !== null;

  const firing = useQuery({ queryKey: ["alerts", "firing"], queryFn: ({ signal }) => listAlerts({ state: "firing" }, signal), refetchInterval: 15_000, enabled: on });
  const here = firing.data && agents.data ? alertsOnPair(firing.data, agents.data, level, src ?? "", dst ?? "") : [];

  if (!on) {
    return (
      <Empty>
        Pick a pair on the{" "}
        <a href={linkTo("/overview")} onClick={follow}>
          overview heatmap
        </a>
        .
      </Empty>
    );
  }

  return (
    <>
      <div className="page-head">
        <h1>
          {srcLabel} → {dstLabel} <small className="muted">({level})</small>
        </h1>
        <TimeRangePicker />
      </div>
      {here.length > 0 && (
        <div className="banner" role="alert" aria-label="Firing alerts on this pair">
          <strong>
            {here.length} alert{here.length === 1 ? "" : "s"} firing on this pair
          </strong>
          <ul>
            {here.map((a) => (
              <li key={a.id}>
                <SeverityBadge severity={a.severity} />{" "}
                <a href={linkTo("/alerts", { alert: a.id })} onClick={follow}>
                  {a.ruleName}
                </a>{" "}
                <span className="muted">since {formatClock(a.startedMs)}</span>
              </li>
            ))}
          </ul>
        </div>
      )}
      <div className="toolbar" style={{ marginBottom: 12 }}>
        <a href={linkTo("/overview", { level })} onClick={follow}>
          ← Overview
        </a>
        <button type="button" onClick={() => set({ src: dst, dst: src, srcLabel: dstLabel, dstLabel: srcLabel })}>
          Reverse direction
        </button>
        <span className="group" role="group" aria-label="RTT range">
          <button type="button" aria-pressed={!fullRange} onClick={() => set({ y: null }, true)}>
            Fit body (p1–p99.9)
          </button>
          <button type="button" aria-pressed={fullRange} onClick={() => set({ y: "full" }, true)}>
            Full range
          </button>
        </span>
        <span className="group" role="group" aria-label="RTT axis">
          <button type="button" aria-pressed={log} onClick={() => set({ scale: null }, true)}>
            Log axis
          </button>
          <button type="button" aria-pressed={!log} onClick={() => set({ scale: "linear" }, true)}>
            Linear axis
          </button>
        </span>
      </div>

      <Card title="Summary" note={range.label}>
        <Async state={summary} isEmpty={(s) => !s || s.count === 0} empty="No samples for this pair in this range.">
          {(s) => <SummaryTable s={s!} />}
        </Async>
        <LossReasons data={lossReasons.data} error={lossReasons.error} />
      </Card>

      <Card
        title="RTT timeline"
        actions={
          csv.data ? (
            <a href={csv.data} download>
              Download CSV
            </a>
          ) : undefined
        }
        note={`${windowS >= 60 ? `${windowS / 60} min` : `${windowS} s`} windows; percentile bands p50–p99 and p99–p99.99; steps = level shifts; ▲ = windows with loss${fullRange ? "" : "; ◆ = tail above the range (Full range shows it)"}`}>
        <Async state={timeline} isEmpty={(d) => d.length === 0}>
          {(points) => (bodySettled ? <Timeline points={points} segments={shifts.data?.segments ?? []} shifts={level === "node" ? shifts.data?.shifts : []} log={log} body={body} full={fullRange} /> : <Loading />)}
        </Async>
        {segs.length > 1 && (
          <p className="muted">
            {segs.length - 1} level shift{segs.length > 2 ? "s" : ""}:{" "}
            {segs
              .slice(1)
              .map((seg, i) => {
                const pc = level === "node" ? shifts.data?.shifts[i]?.pathChange : null;
                const path = pc ? ` (path changed at ${formatClock(pc.atMs, "minute")}, from hop ${pc.diffTtl}${pc.partingAfter.length ? ` after ${pc.partingAfter.join(" / ")}` : ""})` : "";
                return `${formatClock(seg.startMs, "minute")} ${formatUs(segs[i]!.level_us)} → ${formatUs(seg.level_us)}${path}`;
              })
              .join("; ")}
          </p>
        )}
      </Card>

      <div className="grid2">
        <Card
          title="Histogram"
          note={`counts on a log axis${dist.data ? `, ${formatUs(dist.data.bucketUs)} buckets` : ""}`}
          actions={
            <label className="muted">
              Bucket{" "}
              <select value={bucketUs || ""} onChange={(e) => set({ bucket_us: e.target.value || null }, true)} aria-label="Bucket width">
                <option value="">auto</option>
                {BUCKETS_US.map((b) => (
                  <option key={b} value={b}>
                    {formatUs(b)}
                  </option>
                ))}
              </select>
            </label>
          }
        >
          <Async state={dist} isEmpty={(d) => !d || d.bins.length === 0}>
            {(d) => <Histogram bins={d!.bins} logCounts clipAbove={cutoff(d!.cdf, 0.999)} />}
          </Async>
        </Card>
        <Card
          title="CDF"
          note={tail ? "slowest 5%: P(RTT > x), log–log" : "log latency axis"}
          actions={
            <button type="button" aria-pressed={tail} onClick={() => set({ tail: tail ? null : "1" }, true)}>
              Tail zoom (top 5%)
            </button>
          }
        >
          <Async state={dist} isEmpty={(d) => !d || d.cdf.length === 0}>
            {(d) => <CdfChart series={[{ name: `${srcLabel} → ${dstLabel}`, points: tail ? d!.tail : d!.cdf }]} tail={tail} />}
          </Async>
        </Card>
      </div>

      {level === "node" && src && dst && <PathView pair={() => ({ ...range.window(), src, dst })} rangeKey={String(range.key)} refetchInterval={refetchInterval} />}

      {level === "node" && (quorum.error || (quorum.data && quorum.data.length > 0)) && (
        <Card title="Quorum latency" note={`k-th fastest reply per round among ${srcLabel}'s groups that include ${dstLabel} (seed 003 §4.3.5), next to this pair`}>
          <Async state={quorum}>
            {(groups) => (
              <div className="stack">
                {groups.map((g) => (
                  <div key={g.name}>
                    <h3 style={{ fontSize: 14, margin: "4px 0" }}>
                      {g.name} (Q{g.k}/{g.n})
                    </h3>
                    <SummaryTable s={g.summary} />
                    <CdfChart
                      series={[
                        { name: `${srcLabel} → ${dstLabel}`, points: (tail ? dist.data?.tail : dist.data?.cdf) ?? [] },
                        { name: `${g.name} Q${g.k}/${g.n}`, points: tail ? g.tail : g.cdf },
                      ]}
                      tail={tail}
                      height={240}
                    />
                  </div>
                ))}
              </div>
            )}
          </Async>
        </Card>
      )}
    </>
  );
}
