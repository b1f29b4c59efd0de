"""run_emq_worker: in-process runs for outcomes, real processes for signals and kills."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.tasks import TaskResultStatus, task_backends
from django.tasks.signals import task_finished, task_started

from django_emq import enqueue_for, lane_id
from django_emq.backend import FairLanesBackend
from django_emq.engine.rows import Outcome, attempt_history
from tests import tasks
from tests.helpers import wait_for

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parent.parent
A, B = lane_id("USR", 1), lane_id("USR", 2)


def backend() -> FairLanesBackend:
    b = task_backends["default"]
    assert isinstance(b, FairLanesBackend)
    return b


def runs(r: redis.Redis) -> list[str]:
    return [x.decode() for x in r.lrange(tasks.RUNS, 0, -1)]  # type: ignore[union-attr]


def burst(*extra: str) -> None:
    call_command("run_emq_worker", "--burst", "--lease", "5", *extra, verbosity=0)


def _default_sigint() -> None:
    # A shell starts background jobs with SIGINT ignored, and a child inherits
    # that: give the worker Ctrl-C back, as a terminal would.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def worker_process(
    *args: str, settings_module: str = "tests.settings", environ: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """A worker in its own process group (``--reload`` forks a child that must
    go with it), with SIGINT at its default; ``environ`` adds to its environment."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings_module,
        "PYTHONPATH": str(ROOT),
        **(environ or {}),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "django", "run_emq_worker", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_default_sigint,
    )


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Started workers; each one's whole process group is killed at the end, so
    no worker outlives its test to eat the next test's jobs."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def test_flood_small_user_is_served_within_the_first_jobs(emq: redis.Redis) -> None:
    with_lane = [
        {"lane": A, "task_path": "tests.tasks.record", "args": [f"A{i}"]} for i in range(500)
    ]
    q = backend().queue("default")
    q.enqueue_many(with_lane)
    q.enqueue_many(
        [{"lane": B, "task_path": "tests.tasks.record", "args": [f"B{i}"]} for i in range(10)]
    )
    burst("--concurrency", "1")
    order = runs(emq)
    assert len(order) == 510
    first_20 = order[:20]
    assert [x for x in first_20 if x.startswith("B")] == [f"B{i}" for i in range(10)]
    assert [x for x in order if x.startswith("A")] == [f"A{i}" for i in range(500)]


def test_results_are_readable_after_the_worker_ran(emq: redis.Redis) -> None:
    user = User.objects.create_user("ada")
    result = enqueue_for(user, tasks.add, 2, 3)
    burst()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 5
    assert result.attempts == 1
    assert result.started_at is not None
    assert result.finished_at is not None
    assert result.enqueued_at is not None
    assert result.enqueued_at <= result.started_at


def test_async_task_runs(emq: redis.Redis) -> None:
    user = User.objects.create_user("ada")
    result = enqueue_for(user, tasks.async_add, 4, 5)
    burst()
    result.refresh()
    assert result.return_value == 9
    assert runs(emq) == ["async:9"]


def test_task_context_sees_the_attempt(emq: redis.Redis) -> None:
    user = User.objects.create_user("ada")
    result = enqueue_for(user, tasks.attempt_number)
    burst()
    assert backend().get_result(result.id).return_value == 1


def test_the_attempt_time_a_task_sees_is_the_one_read_back(emq: redis.Redis) -> None:
    """Inside the task, ``last_attempted_at`` is the claim's time on the server,
    which the row records and ``get_result`` reads back: not the worker's clock."""
    user = User.objects.create_user("ada")
    result = enqueue_for(user, tasks.attempted_at)
    burst()
    read = backend().get_result(result.id)
    assert read.last_attempted_at is not None
    assert read.return_value == read.last_attempted_at.isoformat()


def test_failing_task_is_retried_then_dead_with_traceback(emq: redis.Redis, settings: Any) -> None:
    settings.EMQ = {**settings.EMQ, "MAX_ATTEMPTS": 3}
    user = User.objects.create_user("ada")
    result = enqueue_for(user, tasks.boom, "x")
    burst()
    assert runs(emq) == ["x", "x", "x"]
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert len(result.errors) == 3
    assert result.errors[-1].exception_class is RuntimeError
    assert "boom x" in result.errors[-1].traceback
    assert result.attempts == 3
    with pytest.raises(ValueError, match="failed"):
        result.return_value  # noqa: B018


def test_task_raising_systemexit_fails_and_the_worker_survives(
    emq: redis.Redis, settings: Any
) -> None:
    settings.EMQ = {**settings.EMQ, "MAX_ATTEMPTS": 1}
    user = User.objects.create_user("ada")
    bad = enqueue_for(user, tasks.exits)
    good = enqueue_for(user, tasks.add, 1, 1)
    burst()
    assert backend().get_result(bad.id).status == TaskResultStatus.FAILED
    assert backend().get_result(good.id).return_value == 2


def test_unimportable_task_goes_dead_with_a_clear_error(emq: redis.Redis) -> None:
    q = backend().queue("default")
    job = q.enqueue(A, "tests.tasks.no_such_task")
    q.enqueue(A, "tests.tasks.record", ["after"])
    burst()
    row = q.job(job.job_id)
    assert row is not None
    assert row["state"] == "dead"
    assert "cannot load task tests.tasks.no_such_task" in row["error"]
    assert runs(emq) == ["after"]


def test_unserialisable_return_value_fails_the_job(emq: redis.Redis, settings: Any) -> None:
    settings.EMQ = {**settings.EMQ, "MAX_ATTEMPTS": 1}
    user = User.objects.create_user("ada")
    result = enqueue_for(user, tasks.unserialisable_result)
    burst()
    assert backend().get_result(result.id).status == TaskResultStatus.FAILED


def test_started_and_finished_signals_fire_in_the_worker(emq: redis.Redis) -> None:
    seen: list[tuple[str, str]] = []

    def started(sender: Any, task_result: Any, **kwargs: Any) -> None:
        seen.append(("started", task_result.status))

    def finished(sender: Any, task_result: Any, **kwargs: Any) -> None:
        seen.append(("finished", task_result.status))

    task_started.connect(started)
    task_finished.connect(finished)
    try:
        enqueue_for(User.objects.create_user("ada"), tasks.add, 1, 2)
        burst()
    finally:
        task_started.disconnect(started)
        task_finished.disconnect(finished)
    assert seen == [("started", "RUNNING"), ("finished", "SUCCESSFUL")]


def test_run_after_waits_until_due(emq: redis.Redis) -> None:
    from datetime import timedelta

    from django.utils import timezone

    user = User.objects.create_user("ada")
    later = tasks.record.using(run_after=timezone.now() + timedelta(seconds=1))
    result = enqueue_for(user, later, "late")
    burst()
    assert runs(emq) == []
    time.sleep(1.05)
    burst()
    assert runs(emq) == ["late"]
    assert backend().get_result(result.id).status == TaskResultStatus.SUCCESSFUL


def test_max_jobs_stops_after_that_many(emq: redis.Redis) -> None:
    q = backend().queue("default")
    q.enqueue_many(
        [{"lane": A, "task_path": "tests.tasks.record", "args": [str(i)]} for i in range(5)]
    )
    call_command("run_emq_worker", "--max-jobs", "2", verbosity=0)
    assert runs(emq) == ["0", "1"]


def test_unknown_queue_is_a_command_error(emq: redis.Redis) -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="nope"):
        call_command("run_emq_worker", "--queue", "nope", "--burst", verbosity=0)


def test_parked_worker_wakes_on_enqueue(
    emq: redis.Redis, processes: list[subprocess.Popen[bytes]]
) -> None:
    p = worker_process("--concurrency", "2")
    processes.append(p)
    wait_for(lambda: emq.hlen(backend().queue("default").keys.workers) > 0)
    time.sleep(0.3)  # let it park
    backend().queue("default").enqueue(A, "tests.tasks.record", ["woken"])
    wait_for(lambda: runs(emq) == ["woken"])


def test_sigterm_mid_job_lets_it_finish(
    emq: redis.Redis, processes: list[subprocess.Popen[bytes]]
) -> None:
    q = backend().queue("default")
    job = q.enqueue(A, "tests.tasks.slow", ["s", 1.0])
    p = worker_process("--grace", "10")
    processes.append(p)
    wait_for(lambda: "start:s" in runs(emq))
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=20) == 0
    assert runs(emq) == ["start:s", "end:s"]
    row = q.job(job.job_id)
    assert row is not None
    assert row["state"] == "done"


def test_sigterm_past_the_grace_releases_the_job_to_its_lane_head(
    emq: redis.Redis, processes: list[subprocess.Popen[bytes]]
) -> None:
    q = backend().queue("default")
    job = q.enqueue(A, "tests.tasks.slow", ["s", 3.0])
    q.enqueue(A, "tests.tasks.record", ["next"])
    p = worker_process("--grace", "0")
    processes.append(p)
    wait_for(lambda: "start:s" in runs(emq))
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=20)
    row = q.job(job.job_id)
    assert row is not None
    assert row["state"] == "pending"
    assert [a.outcome for a in attempt_history(row).kept] == [Outcome.RELEASED]
    assert p.stdout is not None
    (line,) = [ln for ln in p.stdout.read().decode().splitlines() if f"job={job.job_id}" in ln]
    assert line.endswith("outcome=released"), line
    assert "duration=0.000s" not in line, "it ran until the release: its line says how long"
    claims = q.claim(1000)
    assert claims is not None
    assert claims[0].job_id == job.job_id


def test_kill_9_mid_job_is_run_by_another_worker_after_the_lease(
    emq: redis.Redis, processes: list[subprocess.Popen[bytes]]
) -> None:
    q = backend().queue("default")
    job = q.enqueue(A, "tests.tasks.slow", ["k", 30.0])
    p = worker_process("--lease", "1")
    processes.append(p)
    wait_for(lambda: "start:k" in runs(emq))
    p.kill()
    p.wait()
    emq.delete(tasks.RUNS)
    q.connection.hset(q.keys.job(job.job_id), "args", '["k", 0.01]')
    wait_for(lambda: q.reap() != [] or q.totals().active == 0, timeout=10)
    burst()
    assert runs(emq) == ["start:k", "end:k"]
    row = q.job(job.job_id)
    assert row is not None
    assert row["state"] == "done"
    assert row["attempts"] == "2"
    killed, rerun = attempt_history(row).kept
    assert (killed.outcome, rerun.outcome) == (Outcome.EXPIRED, Outcome.DONE)
    assert killed.worker != rerun.worker


def test_health_file_is_touched_every_beat(emq: redis.Redis, tmp_path: Path) -> None:
    health = tmp_path / "alive"
    burst("--health-file", str(health))
    assert health.exists()


def test_worker_refuses_a_backend_that_is_not_fair_lanes(emq: redis.Redis, settings: Any) -> None:
    from django.core.management.base import CommandError

    settings.TASKS = {
        **settings.TASKS,
        "plain": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"},
    }
    with pytest.raises(CommandError, match=r"not django_emq\.backend\.FairLanesBackend"):
        call_command("run_emq_worker", "--backend", "plain", "--burst", verbosity=0)


def test_finished_results_expire_after_result_ttl(emq: redis.Redis, settings: Any) -> None:
    settings.EMQ = {**settings.EMQ, "RESULT_TTL": 120}
    result = enqueue_for(User.objects.create_user("ada"), tasks.add, 1, 2)
    burst()
    ttl_ms = emq.pttl(backend().queue("default").keys.job(result.id))
    assert 0 < ttl_ms <= 120_000


def test_reload_mode_runs_jobs(emq: redis.Redis, processes: list[subprocess.Popen[bytes]]) -> None:
    p = worker_process("--reload")
    processes.append(p)
    backend().queue("default").enqueue(A, "tests.tasks.record", ["reloaded"])
    wait_for(lambda: runs(emq) == ["reloaded"])
    os.killpg(p.pid, signal.SIGINT)  # Ctrl-C: the reloader and its child
    assert p.wait(timeout=20) == 0


def test_worker_survives_a_running_jobs_row_deleted_under_it(
    emq: redis.Redis, processes: list[subprocess.Popen[bytes]]
) -> None:
    q = backend().queue("default")
    job = q.enqueue(A, "tests.tasks.slow", ["gone", 1.5])
    p = worker_process("--lease", "1")
    processes.append(p)
    wait_for(lambda: "start:gone" in runs(emq))
    emq.delete(q.keys.job(job.job_id))  # the beat's next extend finds no row
    q.enqueue(B, "tests.tasks.record", ["after"])
    wait_for(lambda: "after" in runs(emq))
    assert p.poll() is None


@pytest.mark.parametrize("lease", ["0.001", "0.05"])
def test_a_lease_under_the_minimum_is_refused_before_the_worker_starts(
    emq: redis.Redis, lease: str
) -> None:
    """Shorter than a few beats can extend, its jobs would go dead as if their
    worker had died: refused, saying why (docs/settings.md, LEASE)."""
    with pytest.raises(CommandError, match=r"--lease: must be at least 0\.1 seconds \(shorter"):
        call_command("run_emq_worker", "--burst", "--lease", lease, verbosity=0)


def test_a_health_file_in_a_missing_folder_is_refused_before_the_worker_starts(
    emq: redis.Redis, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-folder" / "health"
    with pytest.raises(CommandError, match="no-such-folder does not exist; create it first"):
        call_command("run_emq_worker", "--burst", "--health-file", str(missing), verbosity=0)
