import { describe, expect, test } from "vitest";
import { num, usd } from "./Terms";

describe("equation term formatting", () => {
  test("prices keep three significant digits and tiny terms use exponents", () => {
    expect(usd(0.023)).toBe("$0.023");
    expect(usd(0.0004)).toBe("$4.00e-4");
    expect(usd(1.2069)).toBe("$1.21");
    expect(usd(250)).toBe("$250");
    expect(usd(0)).toBe("$0");
    expect(usd(null)).toBe("–");
  });

  test("numbers show three significant digits, exponents outside 0.001 to a million", () => {
    expect(num(96.8123)).toBe("96.8");
    expect(num(1 / 1_800_000)).toBe("5.56e-7");
    expect(num(18_000_000)).toBe("1.80e+7");
    expect(num(Number.NaN)).toBe("–");
  });
});
