"""Shared fixtures of the service tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


@pytest.fixture
def org(make_org: Callable) -> Any:
    """A fresh org (credentials and id) for one test."""
    return make_org()
