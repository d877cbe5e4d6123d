import type { ReactNode } from "react";

export function Loading({ what = "Loading" }: { what?: string }) {
  return (
    <div className="state" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" />
      {what}…
    </div>
  );
}

export function ErrorState({ error, onRetry }: { error: Error; onRetry?: () => void }) {
  return (
    <div className="state error" role="alert">
      <p>Could not load: {error.message}</p>
      {onRetry && (
        <button type="button" onClick={onRetry}>
          Retry
        </button>
      )}
    </div>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <div className="state">{children}</div>;
}

/** What a section needs of a query: its answer, its error, and a way to ask again. */
export interface QueryState<T> {
  data: T | undefined;
  error: Error | null;
  refetch: () => unknown;
}

/** Render an async section: spinner while the first answer is pending, error with retry, empty, or content. */
export function Async<T>({
  state,
  isEmpty,
  empty,
  children,
}: {
  state: QueryState<T>;
  isEmpty?: (d: T) => boolean;
  empty?: ReactNode;
  children: (d: T) => ReactNode;
}) {
  if (state.error && state.data === undefined) return <ErrorState error={state.error} onRetry={() => void state.refetch()} />;
  if (state.data === undefined) return <Loading />;
  if (isEmpty?.(state.data)) return <Empty>{empty ?? "No data in this range."}</Empty>;
  return <>{children(state.data)}</>;
}

export function Card({ title, note, children, actions, label }: { title: ReactNode; note?: ReactNode; children: ReactNode; actions?: ReactNode; label?: string }) {
  return (
    <section className="card" aria-label={label ?? (typeof title === "string" ? title : undefined)}>
      <h2>
        {title}
        {note && <small>{note}</small>}
        {actions && <span style={{ marginLeft: "auto" }}>{actions}</span>}
      </h2>
      {children}
    </section>
  );
}
