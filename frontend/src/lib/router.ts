// A small history router: the path picks the page, the query string holds the view state
// (range, filters, selected pair) so any view can be shared by its URL.
import { useCallback, useSyncExternalStore } from "react";

const EVENT = "sw:navigate";

function subscribe(cb: () => void): () => void {
  window.addEventListener("popstate", cb);
  window.addEventListener(EVENT, cb);
  return () => {
    window.removeEventListener("popstate", cb);
    window.removeEventListener(EVENT, cb);
  };
}

function snapshot(): string {
  return window.location.pathname + window.location.search;
}

export function useLocation(): { path: string; params: URLSearchParams } {
  const loc = useSyncExternalStore(subscribe, snapshot);
  const q = loc.indexOf("?");
  const path = q >= 0 ? loc.slice(0, q) : loc;
  const params = new URLSearchParams(q >= 0 ? loc.slice(q) : "");
  return { path, params };
}

export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  const before = window.location.pathname;
  if (opts.replace) window.history.replaceState(null, "", to);
  else window.history.pushState(null, "", to);
  window.dispatchEvent(new Event(EVENT));
  if (window.location.pathname !== before) window.scrollTo?.(0, 0);
}

/** Build a URL for a page that keeps the shared params (range, refresh) of the current view. */
export function linkTo(path: string, extra: Record<string, string | null | undefined> = {}): string {
  const cur = new URLSearchParams(window.location.search);
  const next = new URLSearchParams();
  for (const k of ["range", "from", "to", "refresh"]) {
    const v = cur.get(k);
    if (v) next.set(k, v);
  }
  for (const [k, v] of Object.entries(extra)) {
    if (v === null || v === undefined || v === "") next.delete(k);
    else next.set(k, v);
  }
  const qs = next.toString();
  return qs ? `${path}?${qs}` : path;
}

/** Read and update query parameters of the current page. */
export function useParams(): [URLSearchParams, (patch: Record<string, string | null | undefined>, replace?: boolean) => void] {
  const { path, params } = useLocation();
  const set = useCallback(
    (patch: Record<string, string | null | undefined>, replace = false) => {
      const next = new URLSearchParams(window.location.search);
      for (const [k, v] of Object.entries(patch)) {
        if (v === null || v === undefined || v === "") next.delete(k);
        else next.set(k, v);
      }
      const qs = next.toString();
      navigate(qs ? `${path}?${qs}` : path, { replace });
    },
    [path],
  );
  return [params, set];
}
