import { useCombobox, useMultipleSelection } from "downshift";
import { useMemo, useState } from "react";

export type Choice = { value: string; label: string };

/** A searchable multi-select with chips (downshift's combobox and multiple-selection hooks, so
 * keyboard use and ARIA follow the WAI-ARIA combobox pattern): type to filter, Enter or click to
 * add, Backspace or a chip's button to remove. `a11y.id` is the input's id, which the Field's
 * label names; the list is labelled by that same label. */
export function MultiSelect({
  a11y,
  label,
  options,
  value,
  onChange,
  placeholder = "Type to search…",
}: {
  a11y: { id: string; "aria-invalid"?: true; "aria-describedby"?: string };
  label: string;
  options: Choice[];
  value: string[];
  onChange: (next: string[]) => void;
  placeholder?: string;
}) {
  const [query, setQuery] = useState("");
  const byValue = useMemo(() => new Map(options.map((o) => [o.value, o])), [options]);
  // A value the options no longer hold (a deleted agent) still shows, so it can be removed.
  const selected = value.map((v) => byValue.get(v) ?? { value: v, label: v });
  const chosen = new Set(value);
  const q = query.trim().toLowerCase();
  const items = options.filter((o) => !chosen.has(o.value) && (!q || o.label.toLowerCase().includes(q) || o.value.toLowerCase().includes(q)));

  const { getSelectedItemProps, getDropdownProps, removeSelectedItem } = useMultipleSelection<Choice>({
    selectedItems: selected,
    itemToKey: (c) => c?.value,
    onStateChange({ selectedItems, type }) {
      if (type === useMultipleSelection.stateChangeTypes.SelectedItemKeyDownBackspace || type === useMultipleSelection.stateChangeTypes.SelectedItemKeyDownDelete || type === useMultipleSelection.stateChangeTypes.DropdownKeyDownBackspace || type === useMultipleSelection.stateChangeTypes.FunctionRemoveSelectedItem) {
        onChange((selectedItems ?? []).map((c) => c.value));
      }
    },
  });
  const { isOpen, highlightedIndex, getInputProps, getMenuProps, getItemProps } = useCombobox<Choice>({
    items,
    itemToString: (c) => c?.label ?? "",
    itemToKey: (c) => c?.value,
    inputValue: query,
    selectedItem: null,
    inputId: a11y.id,
    labelId: `${a11y.id}-label`,
    menuId: `${a11y.id}-menu`,
    stateReducer(_state, { changes, type }) {
      // Keep the list open after a pick, so several can be added in a row.
      if (type === useCombobox.stateChangeTypes.InputKeyDownEnter || type === useCombobox.stateChangeTypes.ItemClick) {
        return { ...changes, isOpen: true, highlightedIndex: 0, inputValue: "" };
      }
      return changes;
    },
    onStateChange({ type, selectedItem, inputValue }) {
      // Leaving the field adds nothing: only Enter or a click picks (downshift would pick the
      // highlighted option on blur).
      if (type === useCombobox.stateChangeTypes.InputBlur) {
        setQuery("");
      } else if ((type === useCombobox.stateChangeTypes.InputKeyDownEnter || type === useCombobox.stateChangeTypes.ItemClick) && selectedItem) {
        onChange([...value, selectedItem.value]);
        setQuery("");
      } else if (type === useCombobox.stateChangeTypes.InputChange) {
        setQuery(inputValue ?? "");
      }
    },
  });

  return (
    <div className="multiselect">
      {selected.length > 0 && (
        <ul className="chips" aria-label={`${label}: selected`}>
          {selected.map((c, index) => (
            <li key={c.value} className="chip" {...getSelectedItemProps({ selectedItem: c, index })}>
              {c.label}
              <button
                type="button"
                aria-label={`Remove ${c.label}`}
                onClick={(e) => {
                  e.stopPropagation();
                  removeSelectedItem(c);
                }}
              >
                ×
              </button>
            </li>
          ))}
        </ul>
      )}
      <input
        {...getInputProps(getDropdownProps())}
        aria-invalid={a11y["aria-invalid"]}
        aria-describedby={a11y["aria-describedby"]}
        placeholder={selected.length ? "Add…" : placeholder}
      />
      <ul className={`multiselect-menu${isOpen && items.length ? " open" : ""}`} {...getMenuProps()}>
        {isOpen &&
          items.map((c, index) => (
            <li key={c.value} data-value={c.value} className={highlightedIndex === index ? "highlighted" : undefined} {...getItemProps({ item: c, index })}>
              {c.label}
            </li>
          ))}
      </ul>
      {isOpen && items.length === 0 && <p className="multiselect-empty">{q ? `No ${label.toLowerCase()} match “${query.trim()}”` : "All selected"}</p>}
    </div>
  );
}
