import { useQuery } from "@tanstack/react-query";
import { getConcurrency, getConsistency, getDailyMedians, getReplication, getStorageCdf, getStorageComparison } from "../api/analytics";
import type { StorageRow } from "../api/models";
import { CdfChart } from "../components/pair/CdfChart";
import { LinesChart } from "../components/common/LinesChart";
import { Async, Card } from "../components/common/State";
import { TimeRangePicker, useRange } from "../components/common/TimeRangePicker";
import { formatBitsPerS, formatBytes, formatCount, formatDay, formatNsPerBit, formatPercent, formatUs } from "../lib/format";
import { useParams } from "../lib/router";
import { pivot } from "../lib/shape";
import { failureRates, sizeCurves, sizeTable, variantCompare } from "../lib/storage";

function ComparisonTable({ rows, op, adjusted }: { rows: StorageRow[]; op: string; adjusted: boolean }) {
  const t = sizeTable(rows, op, "plain", adjusted);
  if (t.sizes.length === 0) return <p className="muted">No {op.toUpperCase()} samples.</p>;
  return (
    <div className="scroll-x">
      <table className="data" aria-label={`Median ${op.toUpperCase()} latency by provider and object size`}>
        <thead>
          <tr>
            <th>size</th>
            {t.providers.map((p) => (
              <th key={p}>{p}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {t.sizes.map((s) => (
            <tr key={s}>
              <td>{formatBytes(s)}</td>
              {t.providers.map((p) => (
                <td key={p}>{formatUs(t.value(s, p))}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export default function Storage() {
  const [params, set] = useParams();
  const range = useRange();
  const adjusted = params.get("adjust") === "rtt";
  const op = params.get("op") === "get" ? "get" : "put";
  const size = Number(params.get("size") ?? "") || 0;
  const q = () => range.window();

  const refetchInterval = range.refresh || false;
  const comp = useQuery({ queryKey: ["storage", "comparison", range.key], queryFn: ({ signal }) => getStorageComparison(q(), signal), refetchInterval });
  const sizes = [...new Set((comp.data ?? []).map((r) => r.size_bytes))].sort((a, b) => a - b);
  const cdfSize = size || sizes[0] || 0;
  const sized = () => ({ ...range.window(), op, sizeBytes: cdfSize, adjusted });
  // Without a size (no samples yet) there is nothing to ask: an empty answer, as before.
  const cdf = useQuery({
    queryKey: ["storage", "cdf", range.key, op, cdfSize, adjusted],
    queryFn: ({ signal }) => (cdfSize ? getStorageCdf(sized(), signal) : Promise.resolve([])),
    refetchInterval,
  });
  const daily = useQuery({
    queryKey: ["storage", "daily-medians", range.key, op, cdfSize, adjusted],
    queryFn: ({ signal }) => (cdfSize ? getDailyMedians(sized(), signal) : Promise.resolve([])),
    refetchInterval,
  });
  const repl = useQuery({ queryKey: ["storage", "replication", range.key], queryFn: ({ signal }) => getReplication(q(), signal), refetchInterval });
  const cons = useQuery({ queryKey: ["storage", "consistency", range.key], queryFn: ({ signal }) => getConsistency(q(), signal), refetchInterval });
  const conc = useQuery({ queryKey: ["storage", "concurrency", range.key], queryFn: ({ signal }) => getConcurrency(q(), signal), refetchInterval });

  return (
    <>
      <div className="page-head">
        <h1>Storage</h1>
        <TimeRangePicker />
      </div>
      <div className="toolbar" style={{ marginBottom: 12 }}>
        <span className="group" role="group" aria-label="Operation">
          <button type="button" aria-pressed={op === "put"} onClick={() => set({ op: null }, true)}>
            PUT
          </button>
          <button type="button" aria-pressed={op === "get"} onClick={() => set({ op: "get" }, true)}>
            GET
          </button>
        </span>
        <span className="group" role="group" aria-label="Latency basis">
          <button type="button" aria-pressed={!adjusted} onClick={() => set({ adjust: null }, true)}>
            Raw
          </button>
          <button type="button" aria-pressed={adjusted} onClick={() => set({ adjust: "rtt" }, true)}>
            RTT-adjusted
          </button>
        </span>
        {sizes.length > 0 && (
          <label>
            Object size for CDF and daily medians
            <select value={cdfSize} onChange={(e) => set({ size: e.target.value }, true)}>
              {sizes.map((s) => (
                <option key={s} value={s}>
                  {formatBytes(s)}
                </option>
              ))}
            </select>
          </label>
        )}
      </div>

      <Async state={comp} isEmpty={(d) => d.length === 0} empty="No storage samples in this range. Storage targets are measured by agents with storage probes.">
        {(rows) => (
          <>
            <div className="grid2">
              <Card title={`Median PUT latency${adjusted ? " (RTT-adjusted)" : ""}`} note="by provider and object size (seed 000 Table 1)" label="PUT comparison">
                <ComparisonTable rows={rows} op="put" adjusted={adjusted} />
              </Card>
              <Card title={`Median GET latency${adjusted ? " (RTT-adjusted)" : ""}`} note="by provider and object size (seed 000 Table 2)" label="GET comparison">
                <ComparisonTable rows={rows} op="get" adjusted={adjusted} />
              </Card>
            </div>
            <div className="grid2" style={{ marginTop: 16 }}>
              <Card title={`${op.toUpperCase()} latency by object size`} note="median, log–log (seed 000 Figs. 1–2)">
                {(() => {
                  const c = sizeCurves(rows, op, "plain", (r) => (adjusted ? r.p50_adjusted_us : r.p50_us));
                  return <LinesChart rows={c.rows} series={c.series} xLog yLog dots xTicks={sizes} xFormat={(v) => formatBytes(v)} yUnit="us" />;
                })()}
              </Card>
              <Card
                title={`${op.toUpperCase()} latency per bit${adjusted ? " (RTT-adjusted)" : ""}`}
                note={`ns per bit: ${adjusted ? "RTT-adjusted" : "raw"} median / object bits (seed 000 Figs. 3–4)`}
                label="Latency per bit"
              >
                {(() => {
                  const c = sizeCurves(rows, op, "plain", (r) => (adjusted ? r.per_bit_adjusted_ns : r.per_bit_ns));
                  return <LinesChart rows={c.rows} series={c.series} xLog yLog dots xTicks={sizes} xFormat={(v) => formatBytes(v)} yFormat={formatNsPerBit} />;
                })()}
              </Card>
            </div>
            <div className="grid2" style={{ marginTop: 16 }}>
              <Card title="Failure rates" note="failed attempts / attempts, all sizes">
                <table className="data" aria-label="Failure rates">
                  <thead>
                    <tr>
                      <th>provider</th>
                      <th>op</th>
                      <th>attempts</th>
                      <th>failures</th>
                      <th>rate</th>
                    </tr>
                  </thead>
                  <tbody>
                    {failureRates(rows).map((f) => (
                      <tr key={`${f.provider}|${f.op}`}>
                        <td>{f.provider}</td>
                        <td>{f.op}</td>
                        <td>{formatCount(f.count)}</td>
                        <td>{formatCount(f.failures)}</td>
                        <td>{formatPercent(f.rate)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </Card>
              <Card title="Compression" note={`${op.toUpperCase()} median${adjusted ? " less the RTT" : ""}, plain vs gzip-9 (compression time included)`}>
                {(() => {
                  const v = variantCompare(rows, op, "plain", "gzip9", adjusted);
                  if (v.length === 0) return <p className="muted">No gzip-9 variant measured.</p>;
                  return (
                    <table className="data" aria-label="Compression variant">
                      <thead>
                        <tr>
                          <th>provider</th>
                          <th>size</th>
                          <th>plain</th>
                          <th>gzip-9</th>
                          <th>change</th>
                        </tr>
                      </thead>
                      <tbody>
                        {v.map((r) => (
                          <tr key={`${r.provider}|${r.size_bytes}`}>
                            <td>{r.provider}</td>
                            <td>{formatBytes(r.size_bytes)}</td>
                            <td>{formatUs(r.a_us)}</td>
                            <td>{formatUs(r.b_us)}</td>
                            <td>{r.a_us && r.b_us ? formatPercent(r.b_us / r.a_us - 1) : "–"}</td>
                          </tr>
                        ))}
                      </tbody>
                    </table>
                  );
                })()}
              </Card>
            </div>
          </>
        )}
      </Async>

      <div className="grid2" style={{ marginTop: 16 }}>
        <Card title={`${op.toUpperCase()} CDF`} note={`${formatBytes(cdfSize)} objects, per provider (CloudCmp Fig. 6)`}>
          <Async state={cdf} isEmpty={(d) => d.length === 0}>
            {(series) => <CdfChart series={series} tail={false} />}
          </Async>
        </Card>
        <Card title="Daily medians" note={`${op.toUpperCase()} ${formatBytes(cdfSize)} per day (seed 000 Figs. 5–6)`}>
          <Async state={daily} isEmpty={(d) => d.length === 0}>
            {(rows) => {
              const p = pivot(rows, (r) => Date.parse(r.day), (r) => r.provider, (r) => r.p50_us);
              return <LinesChart rows={p.rows} series={p.series} dots xTime xFormat={formatDay} yUnit="us" />;
            }}
          </Async>
        </Card>
      </div>
      <div className="grid2" style={{ marginTop: 16 }}>
        <Card title="Replication" note="GET std dev and p90 by number of copies (seed 000 Figs. 9–10)">
          <Async state={repl} isEmpty={(d) => d.length === 0} empty="No replication variant measured.">
            {(rows) => {
              const p = pivot(rows, (r) => r.x, (r) => r.series, (r) => r.y);
              return <LinesChart rows={p.rows} series={p.series} dots xInteger xFormat={(v) => `${v} copies`} yUnit="us" />;
            }}
          </Async>
        </Card>
        <Card title="Time to consistency" note="read-after-write and list-after-write (CloudCmp)">
          <Async state={cons} isEmpty={(d) => d.length === 0} empty="No consistency probes measured.">
            {(series) => <CdfChart series={series} tail={false} height={260} />}
          </Async>
        </Card>
      </div>
      <Card title="Concurrency scaling" note="aggregate throughput by parallel operations (CloudCmp)">
        <Async state={conc} isEmpty={(d) => d.length === 0} empty="No concurrency runs measured.">
          {(rows) => {
            const p = pivot(rows, (r) => r.x, (r) => r.series, (r) => r.y);
            return <LinesChart rows={p.rows} series={p.series} dots xLog xInteger xTicks={[...new Set(rows.map((r) => r.x))].sort((a, b) => a - b)} xFormat={(v) => String(v)} yFormat={(v) => formatBitsPerS(v).replace(" ", "").replace("bit/s", "b/s")} yWidth={76} />;
          }}
        </Async>
      </Card>
    </>
  );
}
