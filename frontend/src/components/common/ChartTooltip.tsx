import type { ReactNode } from "react";

export interface TipRow {
  name: string;
  value: string;
  color?: string;
}

export function TipBox({ title, rows }: { title: ReactNode; rows: TipRow[] }) {
  return (
    <div className="tooltip">
      <div className="t">{title}</div>
      {rows.map((r) => (
        <div key={r.name} style={{ color: r.color }}>
          {r.name}: {r.value}
        </div>
      ))}
    </div>
  );
}
