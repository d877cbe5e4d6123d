import { useQuery } from "@tanstack/react-query";
import { listAlerts } from "../api/alerts";
import { useAgents } from "../api/agents";
import { getHeatmap } from "../api/analytics";
import type { HeatStat, Level } from "../api/models";
import { Heatmap } from "../components/heatmap/Heatmap";
import { OverviewPanels } from "../components/overview/Panels";
import { RegionMap } from "../components/overview/RegionMap";
import { Async, Card } from "../components/common/State";
import { follow } from "../components/common/Link";
import { TimeRangePicker, useRange } from "../components/common/TimeRangePicker";
import { STAT_HELP, STAT_LABELS } from "../lib/heatmap";
import { linkTo, navigate, useParams } from "../lib/router";
import { firingCells } from "../lib/alertMarks";

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
  const state = useQuery({
    queryKey: ["mesh", "heatmap", range.key, level, stat],
    queryFn: ({ signal }) => getHeatmap({ ...range.window(), level, stat }, signal),
    refetchInterval: range.refresh || false,
  });

  // Firing alerts mark their cells; polled so a new alert shows without a reload.
  const firing = useQuery({ queryKey: ["alerts", "firing"], queryFn: ({ signal }) => listAlerts({ state: "firing" }, signal), refetchInterval: 15_000 });
  const agents = useAgents();
  const marks = firing.data && agents.data ? firingCells(firing.data, agents.data, level) : undefined;

  return (
    <>
      <div className="page-head">
        <h1>Overview</h1>
        <TimeRangePicker />
      </div>
      {firing.data && firing.data.length > 0 && (
        <p className="banner" role="status">
          {firing.data.length} alert{firing.data.length === 1 ? " is" : "s are"} firing; cells outlined in red carry one.{" "}
          <a href={linkTo("/alerts")} onClick={follow}>
            Open the alerts
          </a>
        </p>
      )}
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
          {(vm) => <Heatmap vm={vm} firing={marks} onOpen={(src, dst) => navigate(linkTo("/pair", { level, src, dst, srcLabel: vm.labels[src], dstLabel: vm.labels[dst] }))} />}
        </Async>
      </Card>
      <OverviewPanels nowMs={Math.floor(Date.now() / 60_000) * 60_000} />
      <RegionMap range={range.window} rangeKey={range.key} />
    </>
  );
}
