import { useState } from "react";
import { useParams } from "../../lib/router";
import { DEFAULT_RANGE, PRESETS, fromLocalInput, resolveRange, toLocalInput } from "../../lib/timeRange";

const REFRESH = [
  { key: "", label: "Off" },
  { key: "10s", label: "10 s" },
  { key: "30s", label: "30 s" },
  { key: "1m", label: "1 min" },
  { key: "5m", label: "5 min" },
];

export function refreshMs(key: string | null): number {
  switch (key) {
    case "10s":
      return 10_000;
    case "30s":
      return 30_000;
    case "1m":
      return 60_000;
    case "5m":
      return 300_000;
    default:
      return 0;
  }
}

/** Presets, a custom absolute range (UTC) and auto-refresh, all kept in the URL. */
export function TimeRangePicker() {
  const [params, set] = useParams();
  const range = params.get("range") ?? DEFAULT_RANGE;
  const [custom, setCustom] = useState(false);
  const resolved = resolveRange({ range, from: params.get("from"), to: params.get("to") });
  const [from, setFrom] = useState(toLocalInput(resolved.fromMs));
  const [to, setTo] = useState(toLocalInput(resolved.toMs));

  return (
    <div className="toolbar" role="group" aria-label="Time range">
      <div className="group">
        {PRESETS.map((p) => (
          <button key={p.key} type="button" aria-pressed={range === p.key} onClick={() => set({ range: p.key, from: null, to: null })}>
            {p.label}
          </button>
        ))}
        <button type="button" aria-pressed={range === "custom" || custom} aria-expanded={custom} onClick={() => setCustom((c) => !c)}>
          Custom
        </button>
      </div>
      {custom && (
        <form
          className="toolbar"
          onSubmit={(e) => {
            e.preventDefault();
            const f = fromLocalInput(from);
            const t = fromLocalInput(to);
            if (f && t && t > f) {
              set({ range: "custom", from: f, to: t });
              setCustom(false);
            }
          }}
        >
          <label>
            From (UTC)
            <input type="datetime-local" value={from} onChange={(e) => setFrom(e.target.value)} />
          </label>
          <label>
            To (UTC)
            <input type="datetime-local" value={to} onChange={(e) => setTo(e.target.value)} />
          </label>
          <button type="submit">Apply</button>
        </form>
      )}
      <label>
        Auto-refresh
        <select value={params.get("refresh") ?? ""} onChange={(e) => set({ refresh: e.target.value || null }, true)}>
          {REFRESH.map((r) => (
            <option key={r.key} value={r.key}>
              {r.label}
            </option>
          ))}
        </select>
      </label>
    </div>
  );
}

/** The resolved range of the current URL, recomputed on every render so presets slide with time. */
export function useRange() {
  const [params] = useParams();
  const range = params.get("range") ?? DEFAULT_RANGE;
  const from = params.get("from");
  const to = params.get("to");
  const refresh = refreshMs(params.get("refresh"));
  const resolved = resolveRange({ range, from, to });
  // Query keys name the range, not the instants, so a re-render doesn't refetch. Query
  // functions call window() for the instants: a refetch without a render in between (auto-
  // refresh) must slide the window, which the instants of the last render would not.
  const key = { range, from, to };
  const window = () => resolveRange({ range, from, to });
  return { ...resolved, key, refresh, range, window };
}
