// Fetch state for a page section: loading, error, data, with refetch on key change and
// an optional auto-refresh interval that keeps the old data visible while reloading.
import { useEffect, useRef, useState } from "react";

export interface AsyncState<T> {
  data: T | undefined;
  error: Error | undefined;
  loading: boolean;
  reload: () => void;
}

export function useAsync<T>(fn: (signal: AbortSignal) => Promise<T>, key: string, refreshMs = 0): AsyncState<T> {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<Error>();
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  const fnRef = useRef(fn);
  fnRef.current = fn;
  const lastKey = useRef<string | null>(null);

  useEffect(() => {
    const ctrl = new AbortController();
    if (lastKey.current !== key) {
      // A new question: drop the previous answer so it is never shown under the new filters.
      setData(undefined);
      lastKey.current = key;
    }
    setLoading(true);
    setError(undefined);
    fnRef
      .current(ctrl.signal)
      .then((d) => {
        if (!ctrl.signal.aborted) {
          setData(d);
          setLoading(false);
        }
      })
      .catch((e: unknown) => {
        if (ctrl.signal.aborted) return;
        setError(e instanceof Error ? e : new Error(String(e)));
        setLoading(false);
      });
    return () => ctrl.abort();
  }, [key, tick]);

  useEffect(() => {
    if (!refreshMs) return;
    const id = window.setInterval(() => setTick((t) => t + 1), refreshMs);
    return () => window.clearInterval(id);
  }, [refreshMs]);

  return { data, error, loading, reload: () => setTick((t) => t + 1) };
}
