import type { ReactNode } from "react";

/** A labelled form control with the server's 422 message for it beside it (aria-invalid and
 * aria-describedby point at the message). */
export function Field({ id, label, error, children }: { id: string; label: string; error?: string; children: (a11y: { id: string; "aria-invalid"?: true; "aria-describedby"?: string }) => ReactNode }) {
  const errId = `${id}-error`;
  return (
    <div className={`field${error ? " invalid" : ""}`}>
      <label htmlFor={id}>{label}</label>
      {children({ id, ...(error ? { "aria-invalid": true as const, "aria-describedby": errId } : {}) })}
      {error && (
        <span className="field-error" id={errId} role="alert">
          {error}
        </span>
      )}
    </div>
  );
}
