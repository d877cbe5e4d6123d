import { useQuery } from "@tanstack/react-query";
import { useEffect } from "react";
import { useAgents } from "../api/agents";
import {
  PROTOS,
  getAzPairs,
  getBudget,
  getDegradations,
  getExperiment,
  getExperimentSamples,
  getPairs,
  getSettings,
  listExperiments,
  type ExperimentVM,
  type Proto,
} from "../api/throughput";
import { Card, ErrorState, Loading } from "../components/common/State";
import { TimeRangePicker, useRange } from "../components/common/TimeRangePicker";
import { RunNow, SettingsForm } from "../components/throughput/Admin";
import { Budget } from "../components/throughput/Budget";
import { useRole } from "../lib/role";
import { ExperimentStats } from "../components/throughput/ExperimentStats";
import { ExperimentTimeline } from "../components/throughput/ExperimentTimeline";
import { PairMatrix } from "../components/throughput/PairMatrix";
import { AsymmetryTable, AzPairsTable, DegradationsTable, ExperimentList } from "../components/throughput/Tables";
import { useParams } from "../lib/router";
import { formatInstant } from "../lib/format";

// Experiments are spread over the day (seed 004 §III-B): a week shows every pair several times.
const DEFAULT_RANGE = "7d";

function QueryError({ error }: { error: Error | null }) {
  return error ? <ErrorState error={error} /> : null;
}

function ExperimentDetail({ id }: { id: string }) {
  // A running experiment gains a sample per second: refresh while it may still be going.
  const exp = useQuery({
    queryKey: ["tput-experiment", id],
    queryFn: ({ signal }) => getExperiment(id, signal),
    refetchInterval: (q) => (q.state.data && Date.now() > q.state.data.startMs + 2 * q.state.data.durationS * 1000 + 60_000 ? false : 10_000),
  });
  const samples = useQuery({
    queryKey: ["tput-samples", id],
    queryFn: ({ signal }) => getExperimentSamples(id, signal),
    refetchInterval: exp.data && Date.now() > exp.data.startMs + 2 * exp.data.durationS * 1000 + 60_000 ? false : 10_000,
  });
  if (exp.error) return <ErrorState error={exp.error} />;
  if (!exp.data) return <Loading what="Loading the experiment" />;
  const e = exp.data;
  return (
    <Card title={`Experiment ${e.srcName} ⇄ ${e.dstName}`} note={`${e.proto.toUpperCase()}, ${formatInstant(e.startMs)}, 2 × ${e.durationS} s, ${e.status}`}>
      <QueryError error={samples.error} />
      {samples.data ? <ExperimentTimeline exp={e} samples={samples.data} /> : !samples.error && <Loading what="Loading the samples" />}
      <ExperimentStats exp={e} />
    </Card>
  );
}

export default function Throughput() {
  const [params, set] = useParams();
  useEffect(() => {
    if (!params.get("range")) set({ range: DEFAULT_RANGE }, true);
  }, [params, set]);
  const range = useRange();
  const proto: Proto = params.get("proto") === "udp" ? "udp" : "tcp";
  const src = params.get("src");
  const dst = params.get("dst");
  const expId = params.get("exp");
  const win = () => range.window();
  const poll = range.refresh || false;

  const role = useRole();
  const admin = role === "admin";
  const agents = useAgents();
  const pairs = useQuery({ queryKey: ["tput-pairs", range.key], queryFn: ({ signal }) => getPairs(win(), signal), refetchInterval: poll });
  // A range ending now also lists what is planned for the next day, so a run just scheduled shows.
  const ahead = range.range === "custom" ? 0 : 86_400_000;
  const experiments = useQuery({ queryKey: ["tput-experiments", range.key], queryFn: ({ signal }) => { const w = range.window(); return listExperiments({ fromMs: w.fromMs, toMs: w.toMs + ahead }, signal); }, refetchInterval: poll || 30_000 });
  const az = useQuery({ queryKey: ["tput-az", range.key], queryFn: ({ signal }) => getAzPairs(win(), signal), refetchInterval: poll });
  const degradations = useQuery({ queryKey: ["tput-degradations", range.key], queryFn: ({ signal }) => getDegradations(win(), signal), refetchInterval: poll });
  const budget = useQuery({ queryKey: ["tput-budget"], queryFn: ({ signal }) => getBudget(signal), refetchInterval: 60_000 });
  const settings = useQuery({ queryKey: ["tput-settings"], queryFn: ({ signal }) => getSettings(signal), enabled: admin });

  const region = new Map((agents.data ?? []).map((a) => [a.id, a.region ?? ""]));
  const inPair = (e: ExperimentVM) => !src || !dst || (region.get(e.srcId) === src && region.get(e.dstId) === dst) || (region.get(e.srcId) === dst && region.get(e.dstId) === src);
  const shown = (experiments.data ?? []).filter(inPair);
  const agentPairs = (pairs.data?.agents ?? []).filter((p) => p.proto === proto && src && dst && p.srcRegion === src && p.dstRegion === dst);

  return (
    <>
      <div className="page-head">
        <h1>Throughput</h1>
        <TimeRangePicker />
      </div>
      <Card
        title="Region pairs"
        note={`mean throughput per region pair, ${range.label}`}
        actions={
          <span className="group" role="group" aria-label="Protocol">
            {PROTOS.map((p) => (
              <button key={p} type="button" aria-pressed={p === proto} onClick={() => set({ proto: p === "tcp" ? null : p })}>
                {p.toUpperCase()}
              </button>
            ))}
          </span>
        }
      >
        <QueryError error={pairs.error} />
        {!pairs.data && !pairs.error && <Loading />}
        {pairs.data && <PairMatrix rows={pairs.data.regions} proto={proto} selected={src && dst ? { src, dst } : null} onOpen={(s, d) => set({ src: s, dst: d, exp: null })} />}
      </Card>

      <Card
        title={src && dst ? `Experiments ${src} ⇄ ${dst}` : "Experiments"}
        note={ahead ? `${range.label} and the next 24 h` : range.label}
        actions={
          src && dst ? (
            <button type="button" onClick={() => set({ src: null, dst: null })}>
              All pairs
            </button>
          ) : undefined
        }
      >
        {agentPairs.length > 0 && (
          <p className="muted">
            Agent pairs: {agentPairs.map((p) => `${p.srcName} → ${p.dstName} ${p.proto.toUpperCase()} ${p.experiments} experiment${p.experiments === 1 ? "" : "s"}`).join("; ")}
          </p>
        )}
        <QueryError error={experiments.error} />
        {src && dst && !agents.data && !agents.error && <Loading what="Loading the fleet" />}
        {experiments.data && (agents.data || !src || !dst) && shown.length === 0 && <p className="muted">No experiments {src && dst ? "for this pair " : ""}in this range.</p>}
        {shown.length > 0 && <ExperimentList rows={shown} openId={expId} onOpen={(id) => set({ exp: id })} />}
      </Card>

      {expId && <ExperimentDetail id={expId} />}

      <div className="grid2">
        <Card title="Direction asymmetry" note="forward against reverse mean">
          <QueryError error={pairs.error} />
          {pairs.data && <AsymmetryTable rows={pairs.data.regions} />}
        </Card>
        <Card title="AZ pairs" note="CV_RMSE between the AZ pairs of a region pair">
          <QueryError error={az.error} />
          {az.data && <AzPairsTable rows={az.data} />}
        </Card>
      </div>

      <Card title="Long degradations" note="hours below a fraction of the pair's norm">
        <QueryError error={degradations.error} />
        {degradations.data && <DegradationsTable rows={degradations.data} />}
      </Card>

      <Card title="Egress budget" note="this month">
        <QueryError error={budget.error} />
        {!budget.data && !budget.error && <Loading />}
        {budget.data && <Budget b={budget.data} />}
      </Card>

      {role === "viewer" && (
        <p className="muted" role="note">
          Experiment settings and manual runs need the admin role.
        </p>
      )}
      {admin && (
        <>
          <Card title="Run an experiment now" note="both directions, one after the other">
            <RunNow agents={agents.data ?? []} defaultProto={settings.data?.default_proto ?? "tcp"} onScheduled={(id) => set({ exp: id })} />
          </Card>
          <Card title="Experiment settings">
            <QueryError error={settings.error} />
            {settings.data && <SettingsForm settings={settings.data} />}
          </Card>
        </>
      )}
    </>
  );
}
