// Values of a rule's statistic in its unit, and the units the editor lets people type.
import type { Unit } from "../../api/alertRules";
import { formatBitsPerS, formatCount, formatPercent, formatRatio, formatUs } from "../../lib/format";

export function formatValue(unit: Unit, v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  if (unit === "us") return formatUs(v);
  if (unit === "ratio") return formatPercent(v);
  if (unit === "s") return `${formatCount(v)} s`;
  if (unit === "bytes/s") return formatBitsPerS(v);
  if (unit === "x") return `${formatRatio(v)}×`;
  return formatCount(v);
}

/** The unit people type a threshold in (ms for latency, % for rates) and its factor to the API's unit. */
export function inputUnit(unit: Unit): { label: string; factor: number } {
  if (unit === "us") return { label: "ms", factor: 1000 };
  if (unit === "ratio") return { label: "%", factor: 0.01 };
  if (unit === "s") return { label: "s", factor: 1 };
  if (unit === "bytes/s") return { label: "Mbit/s", factor: 125_000 };
  if (unit === "x") return { label: "× floor", factor: 1 };
  return { label: "", factor: 1 };
}

/** Round-trip a value to the input unit without float noise (0.1 + 0.2 style). */
export function toInput(unit: Unit, v: number): string {
  return String(Number((v / inputUnit(unit).factor).toPrecision(12)));
}

export function fromInput(unit: Unit, text: string): number {
  return Number((Number(text) * inputUnit(unit).factor).toPrecision(12));
}
