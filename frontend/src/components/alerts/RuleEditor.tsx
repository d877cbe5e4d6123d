// The alert rule editor: one form state, drawn in sections, saved only after a backtest on it.
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useId, useMemo, useState, type FormEvent } from "react";
import { createRule, metricOptions, updateRule, type MetricOption, type RuleDraft, type RuleVM, type Unit } from "../../api/alertRules";
import { backtestRule } from "../../api/backtest";
import { fieldErrors } from "../../api/http";
import { useVocabularies, type Vocabularies } from "../../api/vocabularies";
import { useIsAdmin } from "../../lib/role";
import { Card } from "../common/State";
import { BacktestResult } from "./BacktestResult";
import { ConditionSection } from "./ConditionSection";
import { NotifySection } from "./NotifySection";
import { WatchSection } from "./WatchSection";
import { draftFromForm, formFromRule, type RuleForm } from "./ruleForm";

export function RuleEditor({ rule, onSaved, onCancel }: { rule?: RuleVM; onSaved: (r: RuleVM) => void; onCancel?: () => void }) {
  const vocabQ = useVocabularies();
  const metrics = useMemo(() => (vocabQ.data ? metricOptions(vocabQ.data.alert_metrics) : null), [vocabQ.data]);
  if (vocabQ.error) return <p className="state error" role="alert">Could not load the metrics: {vocabQ.error.message}</p>;
  if (!vocabQ.data || !metrics) return <p className="state" role="status">Loading the metrics…</p>;
  return <EditorForm metrics={metrics} vocab={vocabQ.data} rule={rule} onSaved={onSaved} onCancel={onCancel} />;
}

function EditorForm({ metrics, vocab, rule, onSaved, onCancel }: { metrics: MetricOption[]; vocab: Vocabularies; rule?: RuleVM; onSaved: (r: RuleVM) => void; onCancel?: () => void }) {
  const admin = useIsAdmin();
  const uid = useId();
  const qc = useQueryClient();
  const [f, setF] = useState<RuleForm>(() => formFromRule(rule, metrics));
  const metric = metrics.find((m) => m.id === f.metric) ?? metrics[0];
  const stat = metric?.statistics.find((s) => s.id === f.statistic) ?? metric?.statistics[0];
  const unit: Unit = stat?.unit ?? "us";
  const draft = useMemo(() => draftFromForm(f, unit), [f, unit]);
  const draftKey = JSON.stringify(draft);

  const backtest = useMutation({ mutationFn: (d: RuleDraft) => backtestRule(d), mutationKey: ["backtest"] });
  const save = useMutation({
    mutationFn: (d: RuleDraft) => (rule ? updateRule(rule.id, d) : createRule(d)),
    onSuccess: (r) => {
      void qc.invalidateQueries({ queryKey: ["alert-rules"] });
      onSaved(r);
    },
  });
  const [testedKey, setTestedKey] = useState<string | null>(null);
  const tested = testedKey === draftKey && backtest.isSuccess;
  const errors = { ...fieldErrors(backtest.error), ...fieldErrors(save.error) };
  const err = (path: string) => errors[path];
  const known = new Set(["name", "description", "severity", "labels", "metric", "statistic", "window_s", "condition", "condition.value", "condition.k", "condition.baseline", "condition.min_step", "condition.direction", "condition.lookback_windows", "x", "y", "n", "m", "channel_ids", "reminder_interval_s", "scope"]);
  const scopeErr = Object.entries(errors).filter(([k]) => k === "scope" || k.startsWith("scope."));
  const other = Object.entries(errors).filter(([k]) => !known.has(k) && !k.startsWith("scope."));
  const plainError = [backtest.error, save.error].find((e) => e && Object.keys(fieldErrors(e)).length === 0);

  const set = (patch: Partial<RuleForm>) => setF((cur) => ({ ...cur, ...patch }));
  const id = (name: string) => `${uid}-${name}`;

  function runBacktest(e?: FormEvent) {
    e?.preventDefault();
    save.reset();
    setTestedKey(draftKey);
    backtest.mutate(draft);
  }

  const bt = backtest.data;
  const sp = { f, set, err, id };
  return (
    <form className="rule-editor" aria-label={rule ? `Edit rule ${rule.name}` : "New alert rule"} onSubmit={runBacktest} noValidate>
      <WatchSection {...sp} metrics={metrics} metric={metric} vocab={vocab} scopeErr={scopeErr} />
      <ConditionSection {...sp} metric={metric} unit={unit} />
      <NotifySection {...sp} />

      {other.length > 0 && (
        <div className="state error" role="alert">
          {other.map(([k, m]) => (
            <p key={k}>
              {k ? `${k}: ` : ""}
              {m}
            </p>
          ))}
        </div>
      )}
      {plainError && (
        <p className="state error" role="alert">
          {plainError.message}
        </p>
      )}

      <Card title="Backtest" note="the rule replayed over the stored data of the last 7 days (from where it begins, on a young install), before it is saved">
        <div className="toolbar">
          <button type="submit" className={tested ? undefined : "primary"} disabled={backtest.isPending}>
            {backtest.isPending ? "Backtesting…" : "Run backtest"}
          </button>
          {admin && (
            <button type="button" className={tested ? "primary" : undefined} disabled={!tested || save.isPending} onClick={() => save.mutate(draft)}>
              {save.isPending ? "Saving…" : rule ? "Save changes" : "Save rule"}
            </button>
          )}
          {onCancel && (
            <button type="button" onClick={onCancel}>
              Cancel
            </button>
          )}
          {admin && !tested && !backtest.isPending && <span className="muted">Saving is possible once the backtest has run on these settings.</span>}
          {!admin && <span className="muted">Viewers may backtest; saving a rule needs the admin role.</span>}
        </div>
        {bt && testedKey === draftKey && <BacktestResult bt={bt} unit={unit} />}
      </Card>
    </form>
  );
}
