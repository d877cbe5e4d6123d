import { getHeatmap } from "../api/endpoints";
import type { HeatStat, Level } from "../api/models";
import { Heatmap } from "../components/heatmap/Heatmap";
import { Async, Card } from "../components/common/State";
import { TimeRangePicker, useRange } from "../components/common/TimeRangePicker";
import { STAT_HELP, STAT_LABELS } from "../lib/heatmap";
import { linkTo, navigate, useParams } from "../lib/router";
import { useAsync } from "../lib/useAsync";

const LEVELS: Level[] = ["region", "zone", "node"];
const STATS: HeatStat[] = ["p50", "p99", "p99_99", "jitter", "loss"];

export function asLevel(v: string | null): Level {
  return v === "zone" || v === "node" ? v : "region";
}

export default function Overview() {
  const [params, set] = useParams();
  const level = asLevel(params.get("level"));
  const stat: HeatStat = (STATS as string[]).includes(params.get("stat") ?? "") ? (params.get("stat") as HeatStat) : "p50";
  const range = useRange();
  const state = useAsync((signal) => getHeatmap({ fromMs: range.fromMs, toMs: range.toMs, level, stat }, signal), `${range.key}|${level}|${stat}`, range.refresh);

  return (
    <>
      <div className="page-head">
        <h1>Overview</h1>
        <TimeRangePicker />
      </div>
      <Card
        title="Round-trip heatmap"
        note={`${STAT_LABELS[stat]} of RTT by ${level}, ${range.label}`}
        actions={
          <span className="toolbar">
            <span className="group" role="group" aria-label="Level">
              {LEVELS.map((l) => (
                <button key={l} type="button" aria-pressed={l === level} onClick={() => set({ level: l })}>
                  {l === "node" ? "Nodes" : l === "zone" ? "Zones" : "Regions"}
                </button>
              ))}
            </span>
            <span className="group" role="group" aria-label="Statistic">
              {STATS.map((s) => (
                <button key={s} type="button" aria-pressed={s === stat} title={STAT_HELP[s]} onClick={() => set({ stat: s })}>
                  {STAT_LABELS[s]}
                </button>
              ))}
            </span>
          </span>
        }
      >
        <Async state={state} isEmpty={(d) => d.cells.length === 0} empty="No mesh samples in this range. Enroll agents on the Fleet page and they will appear here.">
          {(vm) => <Heatmap vm={vm} onOpen={(src, dst) => navigate(linkTo("/pair", { level, src, dst, srcLabel: vm.labels[src], dstLabel: vm.labels[dst] }))} />}
        </Async>
      </Card>
    </>
  );
}
