import { useMutation } from "@tanstack/react-query";
import { useState } from "react";
import { adviseCompression, type CompressionOut } from "../api/advisors";
import { DecidePage, NumberField, RunState, TargetForm, dataRange, useTargetChoice } from "../components/decide/Layout";
import { Missing, TermsTable, Verdict, num, usd } from "../components/decide/Terms";
import { LinesChart } from "../components/common/LinesChart";
import { Card } from "../components/common/State";
import { formatBytes, formatMs } from "../lib/format";

function SizeResult({ row, prices }: { row: CompressionOut["sizes"][number]; prices: CompressionOut["prices"] }) {
  const t = row.terms;
  const size = formatBytes(row.size_bytes);
  return (
    <Card title={`${size} objects`} label={`Compression of ${size} objects`}>
      {t ? (
        <>
          <Verdict good={t.pays}>{t.pays ? `Compression pays for ${size} objects` : `Compression does not pay for ${size} objects`}</Verdict>
          <p className="equation">
            t_c·C_CPU = {usd(t.lhs_usd)} {t.pays ? "<" : "≥"} ΔS·(C_b + C_s) = {usd(t.rhs_usd)}
          </p>
          <TermsTable
            label={`Equation terms for ${size}`}
            terms={[
              { symbol: "t_c", meaning: "compression + decompression time per object (measured)", value: `${num(t.t_c_s * 1000)} ms` },
              { symbol: "C_CPU", meaning: `CPU price (${String(prices.cpu_provider)}/${String(prices.cpu_region)}), per second`, value: usd(t.c_cpu_per_s) },
              { symbol: "ΔS", meaning: "size reduction (measured gzip-9)", value: `${num(t.delta_s_gb * 1e9)} B (${num(t.delta_s_gb)} GB)` },
              { symbol: "C_b", meaning: `transfer price × transfers (${String(prices.c_b_item)})`, value: `${usd(t.c_b_per_gb)}/GB` },
              { symbol: "C_s", meaning: "storage price × months kept", value: `${usd(t.c_s_per_gb)}/GB` },
            ]}
          />
        </>
      ) : (
        <p className="muted">No equation: this size lacks gzip9 or plain samples, or a price.</p>
      )}
      {row.t_c_s === 0 ? (
        <p>Latency: gzip-9 was no slower than plain here beyond the bytes it saves (measured t_c ≤ 0), so it does not add latency at the measured bandwidth.</p>
      ) : (
        <p>
          Latency: compression lowers it on links slower than <strong>{row.break_even_bps ? `${num(row.break_even_bps / 1e6)} Mbit/s` : "–"}</strong> (ΔS / t_c).
        </p>
      )}
    </Card>
  );
}

function LatencyView({ out }: { out: CompressionOut }) {
  const rows = out.sizes.map((s) => ({
    x: s.size_bytes,
    "plain PUT": s.plain_put_ms,
    "gzip PUT": s.gzip_put_ms,
    "plain GET": s.plain_get_ms,
    "gzip GET": s.gzip_get_ms,
  }));
  return (
    <Card title="Plain vs gzip-9 latency by size" note="medians of the measured samples">
      <LinesChart rows={rows} series={["plain PUT", "gzip PUT", "plain GET", "gzip GET"]} xFormat={formatBytes} yUnit="ms" xLog yLog dots xTicks={out.sizes.map((s) => s.size_bytes)} />
      <table className="data" aria-label="Plain and gzip latency by size">
        <thead>
          <tr>
            <th>size</th>
            <th>stored (gzip)</th>
            <th>plain PUT</th>
            <th>gzip PUT</th>
            <th>plain GET</th>
            <th>gzip GET</th>
            <th>samples</th>
          </tr>
        </thead>
        <tbody>
          {out.sizes.map((s) => (
            <tr key={s.size_bytes}>
              <td>{formatBytes(s.size_bytes)}</td>
              <td>{formatBytes(s.stored_bytes)}</td>
              <td>{formatMs(s.plain_put_ms)}</td>
              <td>{formatMs(s.gzip_put_ms)}</td>
              <td>{formatMs(s.plain_get_ms)}</td>
              <td>{formatMs(s.gzip_get_ms)}</td>
              <td>{s.samples}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </Card>
  );
}

export default function DecideCompression() {
  const [target, setTarget] = useState("");
  const { targets, chosen } = useTargetChoice(target);
  const [content, setContent] = useState<"text" | "binary">("text");
  const [transfer, setTransfer] = useState<"internet" | "inter_region">("internet");
  const [transfers, setTransfers] = useState("1");
  const [months, setMonths] = useState("1");
  const run = useMutation({ mutationFn: adviseCompression });

  const submit = () => run.mutate({ target_id: chosen, content, transfer, transfers: Number(transfers), months_stored: Number(months) });
  const out = run.data;
  return (
    <DecidePage title="compression" current="/decide/compression">
      <Card title="Does gzip-9 pay?" note="seed 000 eq. (1): t_c·C_CPU < ΔS·(C_b + C_s), from your gzip9 and plain samples and your prices">
        <TargetForm label="Compression inputs" targets={targets} chosen={chosen} onTarget={setTarget} busy={run.isPending} onSubmit={submit}>
          <label>
            Content
            <select value={content} onChange={(e) => setContent(e.target.value as "text" | "binary")}>
              <option value="text">text</option>
              <option value="binary">binary</option>
            </select>
          </label>
          <label>
            Billed link
            <select value={transfer} onChange={(e) => setTransfer(e.target.value as "internet" | "inter_region")}>
              <option value="internet">internet egress</option>
              <option value="inter_region">inter-region</option>
            </select>
          </label>
          <NumberField label="Transfers per object" value={transfers} onChange={setTransfers} />
          <NumberField label="Months stored" value={months} onChange={setMonths} />
        </TargetForm>
        <RunState pending={run.isPending} error={run.error} />
        {out && <Missing items={out.missing ?? []} />}
        {out && (
          <p className="muted">
            Prices: C_b {usd(out.prices.c_b_per_gb as number | null)}/GB, C_s {usd(out.prices.c_s_per_gb_month as number | null)}/GB-month, C_CPU {usd(out.prices.c_cpu_per_hour as number | null)}/vCPU-hour. Data: {dataRange(out.source)}.
          </p>
        )}
      </Card>
      {out && out.sizes.length > 0 && (
        <>
          <div className="grid2">
            {out.sizes.map((s) => (
              <SizeResult key={s.size_bytes} row={s} prices={out.prices} />
            ))}
          </div>
          <LatencyView out={out} />
        </>
      )}
    </DecidePage>
  );
}
