import { useMutation, useQuery } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { adviseReplication, listTargets, type ReplicationOut } from "../api/advisors";
import { DecideNav } from "../components/decide/DecideNav";
import { Missing, TermsTable, Verdict, num, usd } from "../components/decide/Terms";
import { Card, Loading } from "../components/common/State";
import { formatBytes, formatMs } from "../lib/format";

function SizeResult({ row }: { row: ReplicationOut["sizes"][number] }) {
  const t = row.terms;
  const size = formatBytes(row.size_bytes);
  return (
    <Card title={`${size} objects, F = ${row.copies}`} label={`Replication of ${size} objects`}>
      {t ? (
        <>
          <Verdict good={t.pays}>{t.pays ? `Replication pays for ${size} objects` : `Replication does not pay for ${size} objects`}</Verdict>
          <p className="equation">
            N_G·C_V·ΔV̄ = {usd(t.lhs_usd)} {t.pays ? ">" : "≤"} F·S̄·(C_s + C_G) = {usd(t.rhs_usd)}
          </p>
          <TermsTable
            label={`Equation terms for ${size}`}
            terms={[
              { symbol: "N_G", meaning: "GETs per month (yours)", value: num(t.n_g) },
              { symbol: "C_V", meaning: "value of 1 ms less std dev per GET (yours)", value: usd(t.c_v_per_ms) },
              { symbol: "ΔV̄", meaning: "std dev of one copy − std dev of the first of F (measured)", value: `${num(t.delta_v_ms)} ms` },
              { symbol: "F", meaning: "copies", value: String(t.f) },
              { symbol: "S̄", meaning: "object size", value: `${num(t.s_gb)} GB` },
              { symbol: "C_s", meaning: "storage price per GB-month", value: usd(t.c_s_per_gb) },
              { symbol: "C_G", meaning: "a copy's monthly GET charges per GB of object", value: usd(t.c_g_per_gb) },
            ]}
          />
        </>
      ) : (
        <p className="muted">{row.note ?? "No equation for this size."}</p>
      )}
      <table className="data" aria-label={`Std dev and p90 by copies for ${size}`}>
        <thead>
          <tr>
            <th>first of k</th>
            <th>std dev</th>
            <th>p90</th>
            <th>mean</th>
            <th>samples</th>
          </tr>
        </thead>
        <tbody>
          {row.by_copies.map((b) => (
            <tr key={b.copies}>
              <td>{b.copies}</td>
              <td>{formatMs(b.std_ms)}</td>
              <td>{formatMs(b.p90_ms)}</td>
              <td>{formatMs(b.mean_ms)}</td>
              <td>{b.count}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </Card>
  );
}

export default function DecideReplication() {
  const targets = useQuery({ queryKey: ["storage-targets"], queryFn: ({ signal }) => listTargets(signal) });
  const [target, setTarget] = useState("");
  const [gets, setGets] = useState("1000000");
  const [value, setValue] = useState("0.000001");
  const run = useMutation({ mutationFn: adviseReplication });
  const chosen = target || targets.data?.[0]?.id || "";

  function submit(e: FormEvent) {
    e.preventDefault();
    if (!chosen) return;
    run.mutate({ target_id: chosen, gets_per_month: Number(gets), value_per_ms_usd: Number(value) });
  }
  const out = run.data;
  return (
    <>
      <div className="page-head">
        <h1>Decide: replication</h1>
      </div>
      <DecideNav current="/decide/replication" />
      <Card title="Do parallel GETs of F copies pay?" note="seed 000 eq. (2): N_G·C_V·ΔV̄ > F·S̄·(C_s + C_G), from your replicated-variant samples">
        {targets.isPending ? (
          <Loading />
        ) : (
          <form className="field-row" onSubmit={submit} aria-label="Replication inputs">
            <label>
              Storage target
              <select value={chosen} onChange={(e) => setTarget(e.target.value)}>
                {(targets.data ?? []).map((t) => (
                  <option key={t.id} value={t.id}>
                    {t.name} ({t.provider} {t.region})
                  </option>
                ))}
              </select>
            </label>
            <label>
              GETs per month (N_G)
              <input type="number" min="0" step="any" value={gets} onChange={(e) => setGets(e.target.value)} />
            </label>
            <label>
              Value of 1 ms less std dev per GET, USD (C_V)
              <input type="number" min="0" step="any" value={value} onChange={(e) => setValue(e.target.value)} />
            </label>
            <button type="submit" className="primary" disabled={!chosen || run.isPending}>
              Evaluate
            </button>
          </form>
        )}
        {run.isPending && <Loading what="Evaluating" />}
        {run.error && (
          <p className="state error" role="alert">
            {run.error.message}
          </p>
        )}
        {out && <Missing items={out.missing ?? []} />}
        {out && (
          <p className="muted">
            Prices: C_s {usd(out.prices.c_s_per_gb_month)}/GB-month, GET {usd(out.prices.get_per_1k)} per 1,000. Data: {out.source.resolution} from {out.source.start.slice(0, 16)} to {out.source.end.slice(0, 16)}.
          </p>
        )}
      </Card>
      {out && (
        <div className="grid2">
          {out.sizes.map((s) => (
            <SizeResult key={s.size_bytes} row={s} />
          ))}
        </div>
      )}
    </>
  );
}
