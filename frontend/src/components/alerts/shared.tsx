import type { RuleVM } from "../../api/alertRules";
import { useIsAdmin } from "../../lib/role";

/** A row's delete button; with `confirm`, only after the user agrees to that question. */
export function DeleteButton({ label, confirm, onDelete }: { label: string; confirm?: string; onDelete: () => void }) {
  if (!useIsAdmin()) return null;
  return (
    <button
      type="button"
      className="danger"
      aria-label={label}
      onClick={() => {
        if (confirm === undefined || window.confirm(confirm)) onDelete();
      }}
    >
      Delete
    </button>
  );
}

/** Which rules a silence or maintenance window mutes: one rule, or any rule whose labels match. */
export function RuleMatchFields({ rules, ruleId, onRuleId, labels, onLabels, placeholder }: { rules: RuleVM[]; ruleId: string; onRuleId: (id: string) => void; labels: string; onLabels: (text: string) => void; placeholder: string }) {
  return (
    <>
      <label>
        Rule
        <select value={ruleId} onChange={(e) => onRuleId(e.target.value)}>
          <option value="">any rule (match labels)</option>
          {rules.map((r) => (
            <option key={r.id} value={r.id}>
              {r.name}
            </option>
          ))}
        </select>
      </label>
      <label>
        Label matchers
        <input value={labels} onChange={(e) => onLabels(e.target.value)} placeholder={placeholder} />
      </label>
    </>
  );
}

/** Rule names for ids, the id itself where the rule is gone. */
export const ruleNamesOf = (rules: RuleVM[], ids: string[]) => ids.map((id) => rules.find((r) => r.id === id)?.name ?? id);
