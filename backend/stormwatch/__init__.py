"""Stormwatch: latency monitoring for the public cloud."""

__version__ = "0.1.0"
