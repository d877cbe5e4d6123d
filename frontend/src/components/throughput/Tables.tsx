import type { AzPairsVM, DegradationVM, ExperimentVM, RegionPairVM } from "../../api/throughput";
import { formatRatio } from "../../lib/format";
import { formatBytesSI, formatMbps, formatUsd } from "../../lib/throughput";
import { formatInstant } from "../../lib/format";

/** Forward against reverse mean per pair; a ratio far from 1 means one way is slower. */
export function AsymmetryTable({ rows }: { rows: RegionPairVM[] }) {
  const byKey = new Map(rows.map((r) => [`${r.proto}|${r.srcRegion}|${r.dstRegion}`, r]));
  const lines = rows
    .filter((r) => r.srcRegion !== r.dstRegion)
    .map((r) => {
      const fwd = r.forwardBps ?? r.meanBps;
      const rev = r.reverseBps ?? byKey.get(`${r.proto}|${r.dstRegion}|${r.srcRegion}`)?.meanBps ?? null;
      const ratio = r.asymmetry ?? (fwd !== null && rev !== null && rev > 0 ? fwd / rev : null);
      return { r, fwd, rev, ratio };
    })
    .filter((l) => l.fwd !== null || l.rev !== null);
  if (lines.length === 0) return <p className="muted">No pair has both directions measured in this range.</p>;
  return (
    <table className="data" aria-label="Direction asymmetry">
      <thead>
        <tr>
          <th>pair</th>
          <th>proto</th>
          <th>forward</th>
          <th>reverse</th>
          <th>forward / reverse</th>
        </tr>
      </thead>
      <tbody>
        {lines.map(({ r, fwd, rev, ratio }) => (
          <tr key={`${r.proto}${r.srcRegion}${r.dstRegion}`}>
            <td>
              {r.srcRegion} → {r.dstRegion}
            </td>
            <td>{r.proto.toUpperCase()}</td>
            <td>{formatMbps(fwd)}</td>
            <td>{formatMbps(rev)}</td>
            <td>{ratio !== null && Math.abs(ratio - 1) >= 0.2 ? <span className="badge warn">{formatRatio(ratio)}</span> : formatRatio(ratio)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** CV_RMSE between the AZ pairs of a region pair (two at a time, over the hours both measured),
 * with each AZ pair's mean and experiment count. */
export function AzPairsTable({ rows }: { rows: AzPairsVM[] }) {
  if (rows.length === 0) return <p className="muted">No region pair has experiments between its AZ pairs in this range.</p>;
  return (
    <table className="data" aria-label="AZ pairs">
      <thead>
        <tr>
          <th>region pair</th>
          <th>proto</th>
          <th>AZ pairs: mean (experiments)</th>
          <th>CV_RMSE</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((r) => (
          <tr key={`${r.proto}${r.srcRegion}${r.dstRegion}`}>
            <td>
              {r.srcRegion} → {r.dstRegion}
            </td>
            <td>{r.proto.toUpperCase()}</td>
            <td style={{ whiteSpace: "normal", textAlign: "left" }}>{r.azPairs.map((z) => `${z.srcZone} → ${z.dstZone}: ${formatMbps(z.meanBps)} (${z.experiments})`).join("; ")}</td>
            <td style={{ whiteSpace: "normal", textAlign: "left" }}>
              {r.comparisons.length === 0
                ? "– (one AZ pair)"
                : r.comparisons.map((c) => `${c.a} vs ${c.b}: ${formatRatio(c.cvRmse)} over ${c.slots} h`).join("; ")}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function DegradationsTable({ rows }: { rows: DegradationVM[] }) {
  if (rows.length === 0) return <p className="muted">No long degradation in this range.</p>;
  return (
    <table className="data" aria-label="Long degradations">
      <thead>
        <tr>
          <th>pair</th>
          <th>proto</th>
          <th>from</th>
          <th>to</th>
          <th>level</th>
          <th>norm</th>
          <th>experiments</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((d) => (
          <tr key={`${d.srcName}${d.dstName}${d.proto}${d.startMs}`}>
            <td>
              {d.srcName} → {d.dstName} ({d.srcRegion} → {d.dstRegion})
            </td>
            <td>{d.proto.toUpperCase()}</td>
            <td>{formatInstant(d.startMs)}</td>
            <td>{d.endMs === null ? "ongoing" : formatInstant(d.endMs)}</td>
            <td>{formatMbps(d.levelBps)}</td>
            <td>{formatMbps(d.normBps)}</td>
            <td>{d.experiments}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** Experiments in the range, newest first; each opens its timeline. */
export function ExperimentList({ rows, openId, onOpen }: { rows: ExperimentVM[]; openId: string | null; onOpen: (id: string) => void }) {
  const sorted = [...rows].sort((a, b) => b.startMs - a.startMs);
  return (
    <table className="data" aria-label="Experiments">
      <thead>
        <tr>
          <th>start</th>
          <th>initiator → responder</th>
          <th>proto</th>
          <th>length</th>
          <th>status</th>
          <th>estimated egress</th>
          <th>by</th>
          <th />
        </tr>
      </thead>
      <tbody>
        {sorted.map((e) => {
          return (
            <tr key={e.id} aria-selected={e.id === openId}>
              <td>{formatInstant(e.startMs)}</td>
              <td>
                {e.srcName} → {e.dstName}
              </td>
              <td>{e.proto.toUpperCase()}</td>
              <td>2 × {e.durationS} s</td>
              <td>
                {e.status}
                {e.missedReason ? <div className="muted">{e.missedReason}</div> : null}
              </td>
              <td>
                {formatBytesSI(e.estBytes)}, {formatUsd(e.estCostUsd)}
              </td>
              <td>{e.origin}</td>
              <td>
                <button type="button" aria-pressed={e.id === openId} aria-label={`Open experiment ${e.srcName} → ${e.dstName} at ${formatInstant(e.startMs)}`} onClick={() => onOpen(e.id)}>
                  Timeline
                </button>
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
