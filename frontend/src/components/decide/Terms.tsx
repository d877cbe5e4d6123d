import type { ReactNode } from "react";

export interface Term {
  symbol: string;
  meaning: string;
  value: string;
}

/** An equation's terms, each with its symbol, meaning and value, as a labelled table. */
export function TermsTable({ label, terms }: { label: string; terms: Term[] }) {
  return (
    <table className="data terms" aria-label={label}>
      <thead>
        <tr>
          <th>term</th>
          <th>meaning</th>
          <th>value</th>
        </tr>
      </thead>
      <tbody>
        {terms.map((t) => (
          <tr key={t.symbol}>
            <th scope="row">{t.symbol}</th>
            <td>{t.meaning}</td>
            <td>{t.value}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** The answer of an advisor in one line, announced to assistive technology. */
export function Verdict({ good, children }: { good: boolean | null; children: ReactNode }) {
  return (
    <p role="status" aria-label="Answer" className={`verdict ${good === null ? "" : good ? "ok" : "bad"}`}>
      {children}
    </p>
  );
}

/** What an advisor could not find in the measurements, instead of a guess. */
export function Missing({ items }: { items: string[] }) {
  if (items.length === 0) return null;
  return (
    <div className="state warn" role="alert" aria-label="Missing data">
      <p>Not enough measured data to answer:</p>
      <ul>
        {items.map((m) => (
          <li key={m}>{m}</li>
        ))}
      </ul>
    </div>
  );
}

export function usd(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  if (v === 0) return "$0";
  const a = Math.abs(v);
  if (a >= 100) return `$${v.toFixed(0)}`;
  // Prices such as $0.023/GB-month keep their third digit; tiny terms go to exponents.
  if (a >= 0.001) return `$${Number(v.toPrecision(3))}`;
  return `$${v.toExponential(2)}`;
}

export function num(v: number | null | undefined, digits = 3): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
  return String(Number(v.toPrecision(digits)));
}
