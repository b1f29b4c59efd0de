"""Per-backend options (``TASKS[alias]["OPTIONS"]`` over ``EMQ``), what an empty
``QUEUES`` means (a check error: django-emq serves named queues only), and
two aliases on one queue (a check warning)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import redis
from django.core.checks import CheckMessage
from django.core.management import CommandError, call_command
from django.tasks import TaskResultStatus, task_backends

from django_emq import lane
from django_emq.backend import FairLanesBackend
from django_emq.conf import emq_settings
from django_emq.engine.rows import Row
from django_emq.exceptions import ConfigurationError
from django_emq.worker import WorkerOptions
from django_emq.worker.options import plan
from tests import tasks
from tests.helpers import lane as lane_of

pytestmark = pytest.mark.django_db
BACKEND = "django_emq.backend.FairLanesBackend"
A = lane_of(1)


def backend(alias: str = "default") -> FairLanesBackend:
    found = task_backends[alias]
    assert isinstance(found, FairLanesBackend)
    return found


def ids(messages: list[CheckMessage]) -> list[str | None]:
    return [m.id for m in messages]


@pytest.fixture
def two_backends(emq: redis.Redis, settings: Any) -> redis.Redis:
    """``default`` with the EMQ defaults, ``short`` with options of its own."""
    settings.TASKS = {
        "default": {"BACKEND": BACKEND, "QUEUES": ["default"]},
        "short": {
            "BACKEND": BACKEND,
            "QUEUES": ["short"],
            "OPTIONS": {"MAX_ATTEMPTS": 1, "RESULT_TTL": 60, "LEASE": 7, "MAX_PAYLOAD": 100},
        },
    }
    return emq


def test_options_override_emq_for_that_backend_only(two_backends: redis.Redis) -> None:
    short = emq_settings("short")
    assert (short.max_attempts, short.result_ttl, short.lease, short.max_payload) == (
        1,
        60.0,
        7.0,
        100,
    )
    assert emq_settings("default") == emq_settings()
    assert not ids(backend("short").check())
    assert not ids(backend("default").check())


def test_two_aliases_run_their_jobs_with_their_own_attempts_and_ttl(
    two_backends: redis.Redis,
) -> None:
    with lane(A):
        quick = tasks.boom.using(backend="short", queue_name="short").enqueue("s")
        patient = tasks.boom.enqueue("d")
    assert backend("short").engine("short").job(quick.id)[Row.MAX_ATTEMPTS] == "1"  # type: ignore[index]
    assert backend().engine("default").job(patient.id)[Row.MAX_ATTEMPTS] == "3"  # type: ignore[index]

    call_command("run_emq_worker", "--backend", "short", "--burst", verbosity=0)

    quick.refresh()
    assert quick.status == TaskResultStatus.FAILED
    assert len(quick.errors) == 1


def test_a_finished_result_is_kept_for_its_backends_result_ttl(
    two_backends: redis.Redis,
) -> None:
    with lane(A):
        result = tasks.add.using(backend="short", queue_name="short").enqueue(1, 2)
    call_command("run_emq_worker", "--backend", "short", "--burst", verbosity=0)
    ttl = two_backends.pttl(backend("short").queue("short").keys.job(result.id))
    assert 0 < ttl <= 60_000


def test_max_payload_of_the_backend_refuses_larger_arguments(two_backends: redis.Redis) -> None:
    with lane(A), pytest.raises(TypeError, match="over the 100-byte limit"):
        tasks.record.using(backend="short", queue_name="short").enqueue("x" * 200)
    assert two_backends.dbsize() == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"LEASE": 0}, r"TASKS\['short'\]\['OPTIONS'\]\['LEASE'\] must be more than zero"),
        ({"MAX_ATTEMPTS": "3"}, r"\['MAX_ATTEMPTS'\] must be a whole number"),
        ({"URL": "redis://x"}, r"\['URL'\] is set for every backend at once: put it in EMQ"),
        ({"LEAS": 5}, r"has an unknown key 'LEAS'"),
    ],
)
def test_bad_options_are_a_check_error_and_refuse_every_enqueue(
    emq: redis.Redis, settings: Any, options: dict[str, Any], message: str
) -> None:
    settings.TASKS = {"short": {"BACKEND": BACKEND, "QUEUES": ["short"], "OPTIONS": options}}
    errors = [m for m in backend("short").check() if m.id == "emq.E008"]
    assert len(errors) == 1
    assert re.search(message, errors[0].msg), errors[0].msg
    with lane(A), pytest.raises(ConfigurationError, match=message):
        tasks.add.using(backend="short", queue_name="short").enqueue(1, 2)
    assert emq.dbsize() == 0


def test_a_worker_runs_with_its_backends_options_and_its_own_flags_over_them(
    two_backends: redis.Redis, settings: Any
) -> None:
    settings.TASKS["short"]["OPTIONS"].update(
        {"BEAT": 1, "SHUTDOWN_GRACE": 4, "PREFETCH": 2, "THREADS": 3, "RETRY_BACKOFF": 9,
         "RETRY_BACKOFF_MAX": 90}
    )  # fmt: skip
    settings.TASKS = settings.TASKS  # a change Django signals
    short = plan(WorkerOptions(concurrency=8), "short")
    assert (short.lease_ms, short.beat_s, short.grace_s, short.prefetch, short.threads) == (
        7000, 1.0, 4.0, 2, 3,
    )  # fmt: skip
    assert (short.retry_backoff, short.retry_backoff_max, short.max_payload) == (9.0, 90.0, 100)
    default = plan(WorkerOptions(concurrency=8), "default")
    assert (default.lease_ms, default.grace_s, default.prefetch, default.threads) == (
        30_000, 30.0, 16, 8,
    )  # fmt: skip
    flags = WorkerOptions(concurrency=8, lease=3, beat=0.5, grace=0, prefetch=5, threads=2)
    told = plan(flags, "short")
    assert (told.lease_ms, told.beat_s, told.grace_s, told.prefetch, told.threads) == (
        3000, 0.5, 0.0, 5, 2,
    )  # fmt: skip


def test_a_shorter_lease_flag_shortens_the_beat_with_it(two_backends: redis.Redis) -> None:
    assert plan(WorkerOptions(lease=0.3), "short").beat_s == pytest.approx(0.1)


@pytest.mark.parametrize(("beat", "lease"), [(40, None), (5, 2), (2, 2)])
def test_a_beat_flag_as_long_as_the_lease_is_refused(
    two_backends: redis.Redis, beat: float, lease: float | None
) -> None:
    """Leases are extended every beat: a --beat of the lease or longer would let
    running jobs' leases expire, so the plan refuses it (the settings' own rule)."""
    with pytest.raises(ValueError, match=r"^--beat .* must be shorter than the lease"):
        plan(WorkerOptions(beat=beat, lease=lease), "default")


def test_a_bad_flag_is_refused_naming_it(two_backends: redis.Redis) -> None:
    with pytest.raises(ValueError, match=r"^prefetch must be at most 1000"):
        plan(WorkerOptions(prefetch=1001), "short")


def test_a_default_that_depends_on_another_key_reads_the_backends(
    two_backends: redis.Redis, settings: Any
) -> None:
    settings.TASKS = {**settings.TASKS, "once": {"BACKEND": BACKEND, "QUEUES": ["once"],
                                                 "OPTIONS": {"MAX_EXPIRIES": 1}}}  # fmt: skip
    assert emq_settings("once").prefetch == 1
    assert emq_settings("short").prefetch == 16


def test_a_backends_settings_are_read_once_until_tasks_change(
    two_backends: redis.Redis, settings: Any
) -> None:
    first = emq_settings("short")
    assert emq_settings("short") is first
    settings.TASKS = {**settings.TASKS, "short": {**settings.TASKS["short"], "OPTIONS": {}}}
    assert emq_settings("short").lease == 30.0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"LEASE": -1}, r"TASKS\['short'\]\['OPTIONS'\]\['LEASE'\] must be more than zero"),
        ({"PREFETCH": 1001}, r"TASKS\['short'\]\['OPTIONS'\]\['PREFETCH'\] must be at most 1000"),
        (
            {"LEASE": 0.1},
            r"EMQ\['BEAT'\] must be shorter than TASKS\['short'\]\['OPTIONS'\]\['LEASE'\]",
        ),
        (
            {"RETRY_BACKOFF_MAX": 0.5, "RETRY_BACKOFF": 2},
            r"TASKS\['short'\]\['OPTIONS'\]\['RETRY_BACKOFF_MAX'\] must not be shorter than "
            r"TASKS\['short'\]\['OPTIONS'\]\['RETRY_BACKOFF'\]",
        ),
    ],
)
def test_a_bad_option_names_the_backend_and_changes_nothing_else(
    two_backends: redis.Redis, settings: Any, options: dict[str, Any], message: str
) -> None:
    """The backend's settings are refused, naming its alias and the key; ``EMQ``
    and the other backends read as before, and no worker of it starts."""
    before = emq_settings(), emq_settings("default")
    settings.TASKS = {**settings.TASKS, "short": {**settings.TASKS["short"], "OPTIONS": options}}
    with pytest.raises(
        ConfigurationError, match="invalid settings for backend 'short': .*" + message
    ):
        emq_settings("short")
    assert (emq_settings(), emq_settings("default")) == before
    assert [m.id for m in backend("default").check()] == []
    with pytest.raises(CommandError, match="backend 'short'"):
        call_command("run_emq_worker", "--backend", "short", "--burst", verbosity=0)
    assert two_backends.dbsize() == 0


def test_options_that_are_not_a_dict_are_a_check_error(emq: redis.Redis, settings: Any) -> None:
    settings.TASKS = {"default": {"BACKEND": BACKEND, "OPTIONS": ["LEASE", 5]}}
    assert ids(backend().check()) == ["emq.E008"]


def test_empty_queues_is_any_queue_name(emq: redis.Redis, settings: Any) -> None:
    """Django's ``QUEUES: []``: no check error, the enqueue registers its queue
    and a burst worker serves it (tests/test_any_queue.py: a running worker)."""
    settings.TASKS = {"default": {"BACKEND": BACKEND, "QUEUES": []}}
    assert ids(backend().check()) == []
    with lane(A):
        result = tasks.add.enqueue(1, 2)
    assert backend().served_queues() == ["default"]
    call_command("run_emq_worker", "--burst", verbosity=0)
    assert backend().get_result(result.id).return_value == 3


def test_two_aliases_on_one_queue_are_a_check_warning(emq: redis.Redis, settings: Any) -> None:
    settings.TASKS = {
        "default": {"BACKEND": BACKEND, "QUEUES": ["default", "shared"]},
        "other": {"BACKEND": BACKEND, "QUEUES": ["shared"]},
    }
    messages = backend().check()
    assert ids(messages) == ["emq.W004"]
    assert "'shared'" in messages[0].msg
    assert "TASKS['other']" in messages[0].msg


def test_a_backend_that_does_not_import_leaves_the_checks_standing(
    emq: redis.Redis, settings: Any
) -> None:
    settings.TASKS = {
        "default": {"BACKEND": BACKEND, "QUEUES": ["default"]},
        "missing": {"BACKEND": "does.not.exist"},
    }
    assert ids(backend().check()) == []
