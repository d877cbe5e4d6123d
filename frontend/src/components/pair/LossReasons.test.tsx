// @vitest-environment jsdom
import { cleanup, render, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import { LossReasons } from "./LossReasons";

afterEach(cleanup);

describe("LossReasons", () => {
  it("lists each recorded reason with its count", () => {
    render(<LossReasons error={null} data={{ lost: 10, complete: true, startMs: 0, reasons: [{ reason: "timeout", count: 7 }, { reason: "refused", count: 3 }] }} />);
    const table = screen.getByRole("table", { name: "Lost rounds by reason" });
    expect(within(table).getAllByRole("columnheader").map((h) => h.textContent)).toEqual(["timeout", "refused"]);
    expect(within(table).getAllByRole("cell").map((c) => c.textContent)).toEqual(["7", "3"]);
    expect(screen.queryByText(/Counted from/)).toBeNull();
  });

  it("says where its counts begin when raw samples do not cover the range", () => {
    render(<LossReasons error={null} data={{ lost: 1, complete: false, startMs: Date.parse("2026-11-21T09:00:00Z"), reasons: [{ reason: "timeout", count: 1 }] }} />);
    expect(screen.getByText(/Counted from 11-21 09:00 UTC/)).toBeTruthy();
  });

  it("shows nothing for a pair that lost no round", () => {
    const { container } = render(<LossReasons error={null} data={{ lost: 0, complete: true, startMs: 0, reasons: [] }} />);
    expect(container.textContent).toBe("");
  });
});
