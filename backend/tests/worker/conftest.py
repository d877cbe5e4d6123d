"""Worker tasks run as beat runs them, against the tests' database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stormwatch.core.config import get_settings
from stormwatch.core.db import get_sync_engine
from tests.conftest import Services


@pytest.fixture
def on_test_db(services: Services) -> Iterator[None]:
    """The tasks' own settings and engines point at the tests' database."""
    get_settings.cache_clear()
    get_sync_engine.cache_clear()
    assert get_settings().database_url == services.database_url
    yield
    get_sync_engine.cache_clear()
