// How much data stands behind a tail percentile (seed 003 Lesson 7): the API counts the samples
// beyond each percentile; with fewer than MIN_BEYOND it rests on a handful of values.
import { formatCount } from "./format";

export const MIN_BEYOND = 10;

/** True when a percentile has a known count of samples beyond it, and too few. */
export function isWeak(beyond: number | null | undefined): boolean {
  return beyond !== null && beyond !== undefined && beyond < MIN_BEYOND;
}

/** "3 samples beyond: too few to support it", or "" when the count is unknown. */
export function supportNote(beyond: number | null | undefined): string {
  if (beyond === null || beyond === undefined) return "";
  return `${formatCount(beyond)} sample${beyond === 1 ? "" : "s"} beyond${isWeak(beyond) ? ": too few to support it" : ""}`;
}
