"""Exports of measured distributions to other monitoring systems (Prometheus)."""
