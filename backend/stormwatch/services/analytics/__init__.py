"""Analytics: mergeable sketches, exact and sketched distributions, change points and the
queries behind the analysis API."""
