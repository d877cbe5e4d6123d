// The rule editor's "When to fire" section: the condition and the X-of-Y, N-of-M counts.
import type { BaselineKind, ConditionType, MetricOption, ShiftDirection, Unit } from "../../api/alertRules";
import { Card } from "../common/State";
import { Field } from "../common/Field";
import type { SectionProps } from "./ruleForm";
import { inputUnit } from "./units";

const CONDITION_LABELS: Record<ConditionType, string> = {
  above: "above a value",
  below: "below a value",
  baseline: "above k × baseline",
  level_shift: "level shift",
};

export function ConditionSection({ f, set, err, id, metric, unit }: SectionProps & { metric: MetricOption | undefined; unit: Unit }) {
  const it = inputUnit(unit);
  return (
    <Card title="When to fire">
      <div className="fields">
        <Field label="Condition" id={id("condition")} error={err("condition")}>
          {(a) => (
            <select {...a} value={f.condition} onChange={(e) => set({ condition: e.target.value as ConditionType })}>
              {(metric?.conditions.length ? metric.conditions : (Object.keys(CONDITION_LABELS) as ConditionType[])).map((c) => (
                <option key={c} value={c}>
                  {CONDITION_LABELS[c]}
                </option>
              ))}
            </select>
          )}
        </Field>
        {(f.condition === "above" || f.condition === "below") && (
          <Field label={`Threshold${it.label ? ` (${it.label})` : ""}`} id={id("value")} error={err("condition.value")}>
            {(a) => <input {...a} type="number" step="any" value={f.value} onChange={(e) => set({ value: e.target.value })} />}
          </Field>
        )}
        {f.condition === "baseline" && (
          <>
            <Field label="Factor k" id={id("k")} error={err("condition.k")}>
              {(a) => <input {...a} type="number" step="any" min="1" value={f.k} onChange={(e) => set({ k: e.target.value })} />}
            </Field>
            <Field label="Baseline" id={id("baseline")} error={err("condition.baseline")}>
              {(a) => (
                <select {...a} value={f.baseline} onChange={(e) => set({ baseline: e.target.value as BaselineKind })}>
                  <option value="prev_24h">previous 24 h</option>
                  <option value="week_ago">same hour a week earlier</option>
                </select>
              )}
            </Field>
          </>
        )}
        {f.condition === "level_shift" && (
          <>
            <Field label={`Minimum shift${it.label ? ` (${it.label})` : ""}`} id={id("min_step")} error={err("condition.min_step")}>
              {(a) => <input {...a} type="number" step="any" min="0" value={f.min_step} onChange={(e) => set({ min_step: e.target.value })} />}
            </Field>
            <Field label="Direction" id={id("direction")} error={err("condition.direction")}>
              {(a) => (
                <select {...a} value={f.direction} onChange={(e) => set({ direction: e.target.value as ShiftDirection })}>
                  <option value="up">up (slower)</option>
                  <option value="down">down</option>
                  <option value="either">either</option>
                </select>
              )}
            </Field>
            <Field label="Detector look-back (windows)" id={id("lookback")} error={err("condition.lookback_windows")}>
              {(a) => <input {...a} type="number" min="10" max="500" value={f.lookback} onChange={(e) => set({ lookback: Number(e.target.value) })} />}
            </Field>
          </>
        )}
        <Field label="X windows" id={id("x")} error={err("x")}>
          {(a) => <input {...a} type="number" min="1" value={f.x} onChange={(e) => set({ x: Number(e.target.value) })} />}
        </Field>
        <Field label="of Y consecutive" id={id("y")} error={err("y")}>
          {(a) => <input {...a} type="number" min="1" value={f.y} onChange={(e) => set({ y: Number(e.target.value) })} />}
        </Field>
        <Field label="N series" id={id("n")} error={err("n")}>
          {(a) => <input {...a} type="number" min="1" value={f.n} onChange={(e) => set({ n: Number(e.target.value) })} />}
        </Field>
        <Field label="of M matched (empty = all)" id={id("m")} error={err("m")}>
          {(a) => <input {...a} type="number" min="1" value={f.m} onChange={(e) => set({ m: e.target.value })} />}
        </Field>
      </div>
    </Card>
  );
}
