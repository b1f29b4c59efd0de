"""The EMQ settings: defaults, lazy cached reading, validation, and reset on change."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from django_emq import conf
from django_emq.conf import KNOWN_KEYS, emq_settings
from django_emq.conf_table import SETTINGS, EMQSettings
from django_emq.connection import reset_connection
from django_emq.exceptions import ConfigurationError

DOCS = Path(__file__).resolve().parent.parent / "docs" / "settings.md"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No EMQ_URL from the outer environment, and no settings cached across tests."""
    monkeypatch.delenv("EMQ_URL", raising=False)
    conf.clear_cache()
    reset_connection()
    yield
    conf.clear_cache()
    reset_connection()


def test_defaults_when_emq_is_empty(settings: SettingsWrapper) -> None:
    settings.EMQ = {}
    current = emq_settings()
    assert current.url is None
    assert current.lease == 30.0
    assert current.max_attempts == 3
    assert current.result_ttl == 86400.0
    assert current.max_payload == 1024 * 1024
    assert current.retry_backoff == 1.0
    assert current.retry_backoff_max == 300.0
    assert current.beat == 2.0
    assert current.enqueue_timeout == 5.0
    assert current.shutdown_grace == 30.0
    assert dict(current.lane_brands) == {"auth.user": "USR"}


def test_missing_emq_setting_means_defaults(settings: SettingsWrapper) -> None:
    del settings.EMQ
    assert emq_settings().max_attempts == 3


def test_settings_are_cached_until_emq_changes(settings: SettingsWrapper) -> None:
    settings.EMQ = {"LEASE": 40}
    first = emq_settings()
    assert emq_settings() is first
    settings.EMQ = {"LEASE": 50}
    assert emq_settings() is not first
    assert emq_settings().lease == 50.0


def test_debug_change_clears_the_cache(settings: SettingsWrapper) -> None:
    settings.EMQ = {}
    settings.DEBUG = False
    assert not emq_settings().embedded
    settings.DEBUG = True
    assert emq_settings().embedded


def test_settings_url_wins_over_environment(
    settings: SettingsWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMQ_URL", "redis://from-env:6379/0")
    settings.EMQ = {"URL": "redis://from-settings:6379/0"}
    assert emq_settings().url == "redis://from-settings:6379/0"


def test_url_falls_back_to_environment(
    settings: SettingsWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMQ_URL", "valkey://from-env:6379/2")
    settings.EMQ = {}
    assert emq_settings().url == "valkey://from-env:6379/2"


def test_empty_url_counts_as_unset(
    settings: SettingsWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMQ_URL", "redis://from-env:6379/0")
    settings.EMQ = {"URL": ""}
    assert emq_settings().url == "redis://from-env:6379/0"


@pytest.mark.parametrize(
    ("url", "debug", "embedded"),
    [
        (None, True, True),
        (None, False, False),
        ("embedded", False, True),
        ("embedded", True, True),
        ("redis://localhost:6379/0", True, False),
    ],
)
def test_when_the_embedded_server_is_used(
    settings: SettingsWrapper, url: str | None, debug: bool, embedded: bool
) -> None:
    settings.DEBUG = debug
    settings.EMQ = {"URL": url}
    assert emq_settings().embedded is embedded


def test_embedded_dir_defaults_under_base_dir(settings: SettingsWrapper, tmp_path: Path) -> None:
    settings.BASE_DIR = tmp_path
    settings.EMQ = {}
    assert emq_settings().embedded_dir == tmp_path / "var" / "emq"


def test_embedded_dir_defaults_under_cwd_without_base_dir(
    settings: SettingsWrapper, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings.EMQ = {}
    if hasattr(settings, "BASE_DIR"):
        del settings.BASE_DIR
    assert emq_settings().embedded_dir == tmp_path / "var" / "emq"


def test_embedded_dir_accepts_a_string(settings: SettingsWrapper, tmp_path: Path) -> None:
    settings.EMQ = {"EMBEDDED_DIR": str(tmp_path / "data")}
    assert emq_settings().embedded_dir == tmp_path / "data"


def test_relative_embedded_dir_is_taken_from_base_dir(
    settings: SettingsWrapper, tmp_path: Path
) -> None:
    settings.BASE_DIR = tmp_path
    settings.EMQ = {"EMBEDDED_DIR": "state/emq"}
    assert emq_settings().embedded_dir == tmp_path / "state" / "emq"


def test_durations_accept_timedelta(settings: SettingsWrapper) -> None:
    settings.EMQ = {"RESULT_TTL": timedelta(days=7), "LEASE": timedelta(minutes=1)}
    assert emq_settings().result_ttl == 7 * 86400.0
    assert emq_settings().lease == 60.0


def test_lane_brands_extend_the_user_default(settings: SettingsWrapper) -> None:
    settings.EMQ = {"LANE_BRANDS": {"auth.Group": "GRP"}}
    current = emq_settings()
    assert current.brand_for("auth.Group") == "GRP"
    assert current.brand_for("auth.User") == "USR"
    assert current.brand_for("auth.Permission") is None


def test_lane_brands_may_rebrand_the_user_model(settings: SettingsWrapper) -> None:
    settings.EMQ = {"LANE_BRANDS": {"auth.User": "ACC"}}
    assert emq_settings().brand_for("auth.user") == "ACC"


def test_queue_options_follow_settings(settings: SettingsWrapper) -> None:
    settings.EMQ = {
        "MAX_ATTEMPTS": 5,
        "MAX_EXPIRIES": 4,
        "RESULT_TTL": 60,
        "MAX_PAYLOAD": 2048,
        "HISTORY": 3,
    }
    assert emq_settings().queue_options() == {
        "max_attempts": 5,
        "max_expiries": 4,
        "result_ttl": timedelta(seconds=60),
        "max_payload": 2048,
        "history": 3,
    }


@pytest.mark.parametrize(
    ("emq", "message"),
    [
        ({"LEASE": -1}, "EMQ['LEASE'] must be more than zero"),
        ({"LEASE": 0}, "EMQ['LEASE'] must be more than zero"),
        ({"LEASE": 0.001}, "EMQ['LEASE'] must be at least 0.1 seconds"),
        ({"LEASE": "30"}, "EMQ['LEASE'] must be a number of seconds"),
        ({"LEASE": float("nan")}, "EMQ['LEASE'] must be a finite number"),
        ({"ENQUEUE_TIMEOUT": 0}, "EMQ['ENQUEUE_TIMEOUT'] must be more than zero"),
        ({"BEAT": 0}, "EMQ['BEAT'] must be more than zero"),
        ({"BEAT": 30, "LEASE": 30}, "EMQ['BEAT'] must be shorter than EMQ['LEASE']"),
        ({"RESULT_TTL": timedelta(0)}, "EMQ['RESULT_TTL'] must be more than zero"),
        ({"SHUTDOWN_GRACE": -1}, "EMQ['SHUTDOWN_GRACE'] must not be negative"),
        ({"RETRY_BACKOFF": -0.5}, "EMQ['RETRY_BACKOFF'] must not be negative"),
        (
            {"RETRY_BACKOFF": 10, "RETRY_BACKOFF_MAX": 5},
            "EMQ['RETRY_BACKOFF_MAX'] must not be shorter",
        ),
        ({"MAX_ATTEMPTS": 0}, "EMQ['MAX_ATTEMPTS'] must be a whole number"),
        ({"MAX_ATTEMPTS": True}, "EMQ['MAX_ATTEMPTS'] must be a whole number"),
        ({"MAX_ATTEMPTS": 2.5}, "EMQ['MAX_ATTEMPTS'] must be a whole number"),
        ({"MAX_ATTEMPTS": 10_001}, "EMQ['MAX_ATTEMPTS'] must be at most 10000"),
        ({"MAX_EXPIRIES": 10**30}, "EMQ['MAX_EXPIRIES'] must be at most 10000"),
        ({"MAX_DEPTH": 2**63}, "EMQ['MAX_DEPTH'] for queue '*' must be at most 1000000000"),
        ({"MAX_PAYLOAD": -1}, "EMQ['MAX_PAYLOAD'] must be a whole number"),
        ({"PREFETCH": 0}, "EMQ['PREFETCH'] must be a whole number"),
        ({"PREFETCH": "16"}, "EMQ['PREFETCH'] must be a whole number"),
        ({"PREFETCH": 1001}, "EMQ['PREFETCH'] must be at most 1000"),
        ({"HISTORY": 0}, "EMQ['HISTORY'] must be a whole number"),
        ({"HISTORY": 1001}, "EMQ['HISTORY'] must be at most 1000"),
        ({"LEASE": 86401}, "EMQ['LEASE'] must be at most 86400 seconds"),
        ({"BEAT": 86401}, "EMQ['BEAT'] must be at most 86400 seconds (24 hours)"),
        ({"RESULT_TTL": 1e30}, "EMQ['RESULT_TTL'] must be at most 31622400 seconds (366 days)"),
        (
            {"ENQUEUE_TIMEOUT": 1e30},
            "EMQ['ENQUEUE_TIMEOUT'] must be at most 31622400 seconds (366 days)",
        ),
        ({"SHUTDOWN_GRACE": timedelta(days=367)}, "EMQ['SHUTDOWN_GRACE'] must be at most"),
        ({"RETRY_BACKOFF": 1e30}, "EMQ['RETRY_BACKOFF'] must be at most 31622400 seconds"),
        ({"RETRY_BACKOFF_MAX": 1e30}, "EMQ['RETRY_BACKOFF_MAX'] must be at most 31622400"),
        ({"EMBEDDED_DIR": 3}, "EMQ['EMBEDDED_DIR'] must be a path"),
        ({"LANE_BRANDS": ["USR"]}, "EMQ['LANE_BRANDS'] must be a dict"),
        ({"LANE_BRANDS": {"auth.Group": "grp"}}, "is not three upper-case letters"),
        ({"LANE_BRANDS": {"auth.Group": "GROUP"}}, "is not three upper-case letters"),
        ({"LANE_BRANDS": {"Group": "GRP"}}, "is not a model label"),
        ({"LANE_BRANDS": {"auth.Group": "JOB"}}, "reserved for job ids"),
        ({"LANE_BRANDS": {"auth.Group": "USR"}}, "gives brand 'USR' to both"),
        (
            {"LANE_BRANDS": {"auth.Group": "GRP", "auth.Permission": "GRP"}},
            "gives brand 'GRP' to both",
        ),
        ({"LANE_BRANDS": {"auth.Group": "GRP", "auth.group": "GRQ"}}, "names model"),
        ({"URL": "http://localhost:6379"}, "EMQ['URL'] is invalid"),
        ({"URL": 6379}, "EMQ['URL'] must be a string"),
        ({"URL": "redis://localhost:6379/0?socket_timeout=soon"}, "EMQ['URL'] is invalid"),
    ],
)
def test_invalid_values_are_reported_and_refused(
    settings: SettingsWrapper, emq: dict[str, Any], message: str
) -> None:
    settings.EMQ = emq
    assert any(message in problem for problem in conf.problems()), conf.problems()
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        emq_settings()


def test_invalid_environment_url_is_named_as_such(
    settings: SettingsWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMQ_URL", "mysql://db")
    settings.EMQ = {}
    assert any(problem.startswith("$EMQ_URL is invalid") for problem in conf.problems())


def test_emq_must_be_a_dict(settings: SettingsWrapper) -> None:
    settings.EMQ = ["URL"]
    assert conf.problems() == ["EMQ must be a dict, not list"]


def test_valid_settings_have_no_problems(settings: SettingsWrapper) -> None:
    settings.EMQ = {"URL": "valkey://localhost:6379/0", "LANE_BRANDS": {"auth.Group": "GRP"}}
    assert conf.problems() == []


def test_unknown_keys_are_listed(settings: SettingsWrapper) -> None:
    settings.EMQ = {"LEASE": 30, "LEASES": 30, "url": "redis://x"}
    assert conf.unknown_keys() == ["LEASES", "url"]


def test_known_keys_are_the_settings_fields() -> None:
    fields = set(EMQSettings.__dataclass_fields__) - {"embedded"}
    assert {key.lower() for key in KNOWN_KEYS} == fields
    assert [s.name for s in SETTINGS] == [s.key.lower() for s in SETTINGS]


def _docs_section(title: str) -> str:
    text = DOCS.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def test_the_docs_list_every_key_once_in_table_order() -> None:
    """The keys table of docs/settings.md has one row per key of the table, in
    its order, and says which a backend may set and which option wins over
    it: the docs page is the one other place a key is named."""
    rows = re.findall(
        r"^\| `([A-Z_]+)` \| [^|]+ \| [^|]+ \| ([^|]+) \|", _docs_section("Keys"), re.MULTILINE
    )
    assert [key for key, _ in rows] == [s.key for s in SETTINGS]
    expected = [
        ("yes" if s.backend else "no") + (f" (`--{s.flag}`)" if s.flag else "") for s in SETTINGS
    ]
    assert [combine for _, combine in rows] == expected


def test_the_docs_list_exactly_the_backend_keys() -> None:
    section = _docs_section("Per-backend options")
    listed = re.search(r"A backend may set (.*?):", section, re.DOTALL)
    assert listed is not None
    named = re.findall(r"`([A-Z_]+)`", listed.group(1))
    assert named == [s.key for s in SETTINGS if s.backend]


def test_the_docs_list_exactly_the_keys_read_from_the_environment() -> None:
    section = _docs_section("From the environment")
    listed = re.search(r"reads (.*?) from the variable", section, re.DOTALL)
    assert listed is not None
    named = re.findall(r"`([A-Z_]+)`", listed.group(1))
    assert named == [s.key for s in SETTINGS if s.env is not None]


def test_settings_are_immutable(settings: SettingsWrapper) -> None:
    settings.EMQ = {"LANE_BRANDS": {"auth.Group": "GRP"}}
    current = emq_settings()
    with pytest.raises(AttributeError):
        current.lease = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        current.lane_brands["auth.permission"] = "PRM"  # type: ignore[index]


def test_prefetch_defaults_to_one_when_one_expiry_is_final(settings: SettingsWrapper) -> None:
    settings.EMQ = {"MAX_EXPIRIES": 1}
    assert conf.emq_settings().prefetch == 1
    settings.EMQ = {"MAX_EXPIRIES": 1, "PREFETCH": 8}
    assert conf.emq_settings().prefetch == 8
    settings.EMQ = {"MAX_EXPIRIES": 2}
    assert conf.emq_settings().prefetch == 16


def test_every_duration_works_at_its_maximum(settings: SettingsWrapper, emq: Any) -> None:
    """The maximums are real bounds, not guesses: at each one the shared client
    connects and an enqueue through the backend writes its job (1e30 raised
    ``OverflowError`` at both)."""
    from django.tasks import task_backends

    from django_emq import lane, lane_id
    from django_emq.backend import FairLanesBackend
    from django_emq.conf_table import MAX_DURATION
    from django_emq.connection import get_connection
    from tests.tasks import add

    settings.EMQ = {**settings.EMQ, "RESULT_TTL": MAX_DURATION, "ENQUEUE_TIMEOUT": MAX_DURATION,
                    "SHUTDOWN_GRACE": MAX_DURATION, "RETRY_BACKOFF": MAX_DURATION,
                    "RETRY_BACKOFF_MAX": MAX_DURATION, "LEASE": 86400, "BEAT": 86399}  # fmt: skip
    assert conf.problems() == []
    assert get_connection().ping()
    with lane(lane_id("USR", 1)):
        result = add.enqueue(1, 2)
    backend = task_backends["default"]
    assert isinstance(backend, FairLanesBackend)
    assert backend.queue("default").job(result.id) is not None
