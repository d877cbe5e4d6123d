// Component tests run in jsdom on the API server's origin, so the typed client (which calls
// window.location.origin) reaches it. Import components only after pointing jsdom there.
import { configure } from "@testing-library/react";
import type { ApiServer } from "./apiServer";

// findBy*/waitFor poll for their condition; on a loaded machine an answer can take seconds.
configure({ asyncUtilTimeout: 15_000 });

declare const jsdom: { reconfigure: (o: { url: string }) => void };

export function setOrigin(api: ApiServer): void {
  jsdom.reconfigure({ url: `${api.url}/` });
  // Recharts' ResponsiveContainer measures with ResizeObserver, which jsdom lacks: report no size changes.
  if (!("ResizeObserver" in globalThis)) {
    (globalThis as { ResizeObserver?: unknown }).ResizeObserver = class {
      observe() {}
      unobserve() {}
      disconnect() {}
    };
  }
}
