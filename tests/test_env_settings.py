"""``django_emq.conf.env_settings()``: ``EMQ`` from ``EMQ_*`` variables, cast by django-environ."""

from __future__ import annotations

import pytest

from django_emq.conf import env_settings
from django_emq.conf_table import SETTINGS
from django_emq.exceptions import ConfigurationError


def test_only_the_variables_that_are_set_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("EMQ_URL", "EMQ_LEASE", "EMQ_SHARDS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EMQ_MAX_ATTEMPTS", "5")
    assert env_settings() == {"MAX_ATTEMPTS": 5}


def test_every_kind_of_value_is_cast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMQ_URL", "redis://cache:6379/1")
    monkeypatch.setenv("EMQ_LEASE", "12.5")
    monkeypatch.setenv("EMQ_PREFETCH", "4")
    monkeypatch.setenv("EMQ_SHARDS", "default=3,reports=2")
    monkeypatch.setenv("EMQ_LANE_BRANDS", "shop.Customer=CUS")
    found = env_settings()
    assert found["URL"] == "redis://cache:6379/1"
    assert found["LEASE"] == 12.5
    assert found["PREFETCH"] == 4
    assert found["SHARDS"] == {"default": 3, "reports": 2}
    assert found["LANE_BRANDS"] == {"shop.Customer": "CUS"}


@pytest.mark.parametrize(("name", "value"), [("EMQ_LEASE", "soon"), ("EMQ_SHARDS", "default=x")])
def test_a_value_that_does_not_cast_names_its_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=rf"\${name} is invalid"):
        env_settings()


def test_a_prefix_of_your_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUEUE_LEASE", "9")
    assert env_settings(prefix="QUEUE_") == {"LEASE": 9.0}


def test_the_keys_read_are_those_of_the_table_with_a_cast(monkeypatch: pytest.MonkeyPatch) -> None:
    """One variable per key that has an environment cast; RATE and SCHEDULES
    (no cast: a pair, a dict of dicts) are never read."""
    values = {"THREADS": "4", "HISTORY": "5", "MAX_DEPTH": "100", "FAIRNESS": "time",
              "METRICS_TOKEN": "s" * 16, "TENANT": "organization", "RATE": "10,60",
              "SCHEDULES": "x"}  # fmt: skip
    for key, value in values.items():
        monkeypatch.setenv(f"EMQ_{key}", value)
    found = env_settings()
    assert {key for key in values if key in found} == {
        s.key for s in SETTINGS if s.env is not None and s.key in values
    }
    assert (found["THREADS"], found["HISTORY"], found["MAX_DEPTH"]) == (4, 5, 100)
    assert (found["FAIRNESS"], found["TENANT"]) == ("time", "organization")


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("EMQ_LEASE", "2e1", 20.0),
        ("EMQ_LEASE", "0.5e1", 5.0),
        ("EMQ_RESULT_TTL", " 3600 ", 3600.0),
        ("EMQ_SHUTDOWN_GRACE", "1.5", 1.5),
        ("EMQ_MAX_ATTEMPTS", "7", 7),
    ],
)
def test_numbers_are_read_as_python_reads_them(
    monkeypatch: pytest.MonkeyPatch, name: str, text: str, value: float
) -> None:
    """An exponent is an exponent: django-environ's float cast read ``2e1`` as 21.0."""
    monkeypatch.setenv(name, text)
    found = env_settings()[name.removeprefix("EMQ_")]
    assert (found, type(found)) == (value, type(value))


@pytest.mark.parametrize(
    ("name", "text", "kind"),
    [
        ("EMQ_ENQUEUE_TIMEOUT", "5min", "a number"),
        ("EMQ_SHUTDOWN_GRACE", "2min", "a number"),
        ("EMQ_LEASE", "abc", "a number"),
        ("EMQ_LEASE", "", "a number"),
        ("EMQ_MAX_ATTEMPTS", "2.5", "a whole number"),
        ("EMQ_PREFETCH", "1e3", "a whole number"),
    ],
)
def test_a_number_that_does_not_parse_names_its_variable_and_value(
    monkeypatch: pytest.MonkeyPatch, name: str, text: str, kind: str
) -> None:
    """Refused whole, never read in part (django-environ read ``5min`` as 5.0)."""
    monkeypatch.setenv(name, text)
    with pytest.raises(ConfigurationError) as caught:
        env_settings()
    assert str(caught.value) == f"${name} is invalid: must be {kind}, not {text!r}"
