"""STORMWATCH_ENGINE: which raw-storage engine the clusters started here are made for."""

import pytest

from stormwatch.devtools import services
from stormwatch.devtools.services import requested_engine, timescaledb_installed


@pytest.mark.parametrize("value", ["", "auto", "AUTO", " auto "])
def test_auto_takes_timescaledb_exactly_when_it_is_installed(value: str) -> None:
    assert requested_engine(value) == ("timescaledb" if timescaledb_installed() else "postgres")


def test_postgres_is_always_available() -> None:
    assert requested_engine("postgres") == "postgres"


def test_an_unknown_engine_is_refused_naming_the_setting() -> None:
    with pytest.raises(ValueError, match="STORMWATCH_ENGINE='mysql'"):
        requested_engine("mysql")


def test_timescaledb_asked_for_but_not_installed_is_an_error_saying_how_to_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(services, "timescaledb_installed", lambda bin_dir=None: False)
    with pytest.raises(RuntimeError, match="bootstrap.sh"):
        requested_engine("timescaledb")
    assert requested_engine("auto") == "postgres"


def test_the_environment_variable_decides_when_no_value_is_given(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORMWATCH_ENGINE", "postgres")
    assert requested_engine() == "postgres"
    monkeypatch.delenv("STORMWATCH_ENGINE")
    assert requested_engine() == requested_engine("auto")
