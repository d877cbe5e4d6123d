"""Prometheus metrics of the API and the worker (docs/operations.md, "Metrics")."""
