import type { ReactNode } from "react";
import { fieldErrors } from "../../api/http";

/** A labelled form control with the server's 422 message for it beside it (aria-invalid and
 * aria-describedby point at the message). */
export function Field({ id, label, error, children }: { id: string; label: string; error?: string; children: (a11y: { id: string; "aria-invalid"?: true; "aria-describedby"?: string }) => ReactNode }) {
  const errId = `${id}-error`;
  return (
    <div className={`field${error ? " invalid" : ""}`}>
      <label htmlFor={id} id={`${id}-label`}>
        {label}
      </label>
      {children({ id, ...(error ? { "aria-invalid": true as const, "aria-describedby": errId } : {}) })}
      {error && (
        <span className="field-error" id={errId} role="alert">
          {error}
        </span>
      )}
    </div>
  );
}

/** The server's refusal where no field shows it: the 422 messages of fields the form does not
 * have (`shown` are the ones it places beside their fields), or the whole error. */
export function FormError({ error, shown }: { error: Error | null; shown: Iterable<string> }) {
  if (!error) return null;
  const errs = fieldErrors(error);
  const placed = new Set(shown);
  const leftover = Object.entries(errs).filter(([k]) => !placed.has(k));
  if (Object.keys(errs).length > 0 && leftover.length === 0) return null;
  return (
    <p className="state error" role="alert">
      {leftover.length ? leftover.map(([k, m]) => `${k}: ${m}`).join("; ") : error.message}
    </p>
  );
}
