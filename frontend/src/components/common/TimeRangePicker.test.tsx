// @vitest-environment jsdom
import { cleanup, render } from "@testing-library/react";
import { afterEach, expect, it, vi } from "vitest";
import { navigate } from "../../lib/router";
import { useRange } from "./TimeRangePicker";

afterEach(() => {
  cleanup();
  vi.useRealTimers();
});

it("a query function's window slides with the clock when nothing renders in between", () => {
  // Auto-refresh refetches with the query function of the last render: it must not reuse
  // that render's instants.
  navigate("/overview?range=1h&refresh=10s");
  const t0 = Date.parse("2026-11-28T05:10:00Z");
  vi.useFakeTimers({ now: t0, toFake: ["Date"] });
  let range: ReturnType<typeof useRange> | undefined;
  function Probe() {
    range = useRange();
    return null;
  }
  render(<Probe />);
  expect(range?.refresh).toBe(10_000);
  const renderedToMs = range?.toMs ?? NaN;
  vi.setSystemTime(t0 + 10_000);
  const w = range?.window();
  expect(w && w.toMs - renderedToMs).toBe(10_000);
  expect(w && w.toMs - w.fromMs).toBe(3_600_000);
});
