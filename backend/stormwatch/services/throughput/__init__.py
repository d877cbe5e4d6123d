"""Throughput experiments (seed 004): scheduling within a budget, the agents' share of the
config, and the analyses (per-experiment statistics, transitions, asymmetry, CV_RMSE
between AZ pairs, long degradations)."""
