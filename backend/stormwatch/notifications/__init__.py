"""Delivery channels: one module per kind behind the small interface of `base`."""
