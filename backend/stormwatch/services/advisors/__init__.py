"""Decisions from the org's own measurements: seed 000's cost equations, seed 001's placement
policies, seed 003's timeouts, rankings, and the pricing catalog they read."""
