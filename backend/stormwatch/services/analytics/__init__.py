"""Analytics: mergeable sketches, exact and sketched distributions, change points, and the
reads behind the analysis API (filters and fleet, source choice, raw and rollup reads,
day-to-date sketches, grouped distributions and window levels)."""
