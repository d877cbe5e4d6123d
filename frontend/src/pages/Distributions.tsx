import { useQuery } from "@tanstack/react-query";
import { getBoxes, getPairLines } from "../api/analytics";
import { BoxPlot } from "../components/distributions/BoxPlot";
import { LinesChart } from "../components/common/LinesChart";
import { Async, Card } from "../components/common/State";
import { TimeRangePicker, useRange } from "../components/common/TimeRangePicker";
import { formatBytes, formatTime } from "../lib/format";
import { useParams } from "../lib/router";
import { pivot } from "../lib/shape";
import { TOPOLOGY_LABELS, topologyLabel, useVocabularies } from "../api/vocabularies";
import { windowSecondsFor } from "../lib/timeRange";

export default function Distributions() {
  const [params, set] = useParams();
  const range = useRange();
  const log = params.get("scale") !== "linear";
  const topo = params.get("class") ?? "cross_region";
  const windowS = windowSecondsFor(range.toMs - range.fromMs, 240);
  // Nearest first, as the API lists them (seed 003 Fig. 3).
  const classes = useVocabularies().data?.topology_classes;

  const refetchInterval = range.refresh || false;
  const byClass = useQuery({
    queryKey: ["mesh", "boxes", range.key, "topology_class"],
    queryFn: ({ signal }) => getBoxes({ ...range.window(), groupBy: "topology_class" }, signal),
    refetchInterval,
  });
  const byPayload = useQuery({
    queryKey: ["mesh", "boxes", range.key, "payload_bytes", topo],
    queryFn: ({ signal }) => getBoxes({ ...range.window(), groupBy: "payload_bytes", topologyClass: topo }, signal),
    refetchInterval,
  });
  const lines = useQuery({
    queryKey: ["mesh", "pair-lines", range.key, topo, windowS],
    queryFn: ({ signal }) => getPairLines({ ...range.window(), topologyClass: topo, windowS }, signal),
    refetchInterval,
  });
  const span = range.toMs - range.fromMs;

  return (
    <>
      <div className="page-head">
        <h1>Distributions</h1>
        <TimeRangePicker />
      </div>
      <div className="toolbar" style={{ marginBottom: 12 }}>
        <span className="group" role="group" aria-label="Latency axis">
          <button type="button" aria-pressed={log} onClick={() => set({ scale: null }, true)}>
            Log axis
          </button>
          <button type="button" aria-pressed={!log} onClick={() => set({ scale: "linear" }, true)}>
            Linear axis
          </button>
        </span>
        <label>
          Topology class for payload and pairs
          <select value={topo} onChange={(e) => set({ class: e.target.value }, true)}>
            {(classes ?? [topo]).map((c) => (
              <option key={c} value={c}>
                {topologyLabel(c)}
              </option>
            ))}
          </select>
        </label>
      </div>
      <Card title="RTT by topology class" note="box p25–p75, line p50, whiskers p5/p95, ○ mean (seed 003 Fig. 3)">
        <Async state={byClass} isEmpty={(d) => d.length === 0}>
          {(boxes) => <BoxPlot boxes={boxes} order={classes} log={log} labels={TOPOLOGY_LABELS} />}
        </Async>
      </Card>
      <div className="grid2">
        <Card title="Payload size" note={`RTT by message payload, ${topologyLabel(topo)} pairs`}>
          <Async state={byPayload} isEmpty={(d) => d.length === 0}>
            {(boxes) => (
              <BoxPlot
                boxes={boxes}
                order={[...boxes].map((b) => b.group).sort((a, b) => Number(a) - Number(b))}
                log={log}
                labels={Object.fromEntries(boxes.map((b) => [b.group, formatBytes(Number(b.group))]))}
                height={280}
              />
            )}
          </Async>
        </Card>
        <Card
          title="Node pairs over time"
          note={`p50 per pair, ${topologyLabel(topo)} (seed 003 Fig. 8)`}
        >
          <Async state={lines} isEmpty={(d) => d.length === 0} empty="No pairs of this class in this range.">
            {(series) => {
              const p = pivot(
                series.flatMap((s) => s.points.map((pt) => ({ s: s.name, ...pt }))),
                (r) => r.t,
                (r) => r.s,
                (r) => r.v,
              );
              return <LinesChart rows={p.rows} series={p.series} xTime xFormat={(v) => formatTime(v, span)} yUnit="us" yLog={log} height={280} />;
            }}
          </Async>
        </Card>
      </div>
    </>
  );
}
