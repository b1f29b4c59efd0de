"""SIGTERM and coroutine tasks, with real worker processes: the grace period
holds for coroutine jobs as it does for sync ones. A coroutine job that
finishes within the grace is recorded (never released, never run again); one
still running at its end is cancelled and released to the head of its lane,
its outcome never recorded; and no coroutine, not one that never returns nor
one that swallows its cancel, keeps the worker alive past the grace and
``STOP_MARGIN``."""

from __future__ import annotations

import signal
from pathlib import Path

import redis

from django_emq import enqueue_for, lane_id
from django_emq.engine.queue import Queue
from django_emq.engine.rows import Outcome, attempt_history
from tests import chaos_tasks
from tests.chaos_tasks import read_runs
from tests.faults import Workers
from tests.helpers import wait_for
from tests.invariants import check_invariants
from tests.test_worker import backend


def outcomes(q: Queue, job_id: str) -> tuple[str, list[str]]:
    row = q.job(job_id)
    assert row is not None
    return row["state"], [a.outcome for a in attempt_history(row).kept]


def test_a_coroutine_job_that_finishes_within_the_grace_is_recorded(
    emq: redis.Redis, workers: Workers, tmp_path: Path
) -> None:
    q = backend().queue("default")
    go = tmp_path / "go"
    job = enqueue_for(lane_id("USR", 1), chaos_tasks.awaits_file, "within", str(go))
    worker = workers.start("--concurrency", "2", "--grace", "60")
    wait_for(lambda: "within" in read_runs(workers.runs), what="the coroutine job running")
    worker.signal(signal.SIGTERM)
    wait_for(lambda: "no new claims" in worker.output(), what="the worker told to stop")
    go.touch()
    worker.process.wait(timeout=60)
    assert worker.process.returncode == 0
    assert outcomes(q, job.id) == ("done", [Outcome.DONE])
    runs = read_runs(workers.runs)
    assert [len(runs[label]) for label in ("within", "within-end")] == [1, 1]
    check_invariants(q)


def test_coroutine_jobs_past_the_grace_are_cancelled_and_released(
    emq: redis.Redis, workers: Workers, tmp_path: Path
) -> None:
    """One would finish later (it waits for a file created only after the
    worker is gone), one swallows every cancel: both are released when the
    grace ends, neither finishes, and the worker ends."""
    q = backend().queue("default")
    never = str(tmp_path / "never")
    late = enqueue_for(lane_id("USR", 1), chaos_tasks.awaits_file, "late", never)
    stubborn = enqueue_for(lane_id("USR", 2), chaos_tasks.swallows_cancel, "stubborn")
    worker = workers.start("--concurrency", "2", "--grace", "1")
    wait_for(
        lambda: {"late", "stubborn"} <= set(read_runs(workers.runs)),
        what="both coroutine jobs running",
    )
    worker.signal(signal.SIGTERM)
    worker.process.wait(timeout=60)  # a safety net: the grace is 1 s, the margin 5 s
    assert worker.process.returncode == 0
    Path(never).touch()
    for job in (late, stubborn):
        assert outcomes(q, job.id) == ("pending", [Outcome.RELEASED])
    assert "late-end" not in read_runs(workers.runs)
    log = worker.output()
    assert f"job={late.id}" in log
    assert f"job={stubborn.id}" in log
    assert "left behind, still running after their cancel" in log
    assert f"job {stubborn.id} ({chaos_tasks.swallows_cancel.module_path})" in log
    assert "Task was destroyed but it is pending" not in log  # left behind on purpose
    check_invariants(q)


def test_a_coroutine_job_blocking_the_loop_cannot_keep_a_stopping_worker(
    emq: redis.Redis, workers: Workers
) -> None:
    """Its loop blocked, the worker cannot wind down: within the grace and
    ``HARD_MARGIN`` the watchdog ends the process. The job blocking the loop is
    charged (its lease ended, counted as an expiry: a job that wedges every
    worker it meets ends dead); the job held beside it is released uncharged."""
    q = backend().queue("default")
    job = enqueue_for(lane_id("USR", 1), chaos_tasks.blocks_the_loop, "blocker", 3600.0)
    beside = enqueue_for(lane_id("USR", 2), chaos_tasks.awaits_file, "beside", "/nonexistent")
    worker = workers.start("--concurrency", "2", "--grace", "1")
    wait_for(lambda: "blocker" in read_runs(workers.runs), what="the loop blocked")
    worker.signal(signal.SIGTERM)
    worker.process.wait(timeout=60)  # a safety net: the grace is 1 s, the margin 10 s
    assert worker.process.returncode == 1
    assert outcomes(q, job.id) == ("pending", [Outcome.EXPIRED])
    assert (q.job(job.id) or {}).get("expiries") == "1"
    assert outcomes(q, beside.id)[0] == "pending"
    assert outcomes(q, beside.id)[1] in ([], [Outcome.RELEASED])  # started, or not yet
    assert (q.job(beside.id) or {}).get("expiries", "0") == "0"
    log = worker.output()
    assert "still running past its grace" in log
    assert f"blocked by job {job.id}" in log
    check_invariants(q)


def test_a_sync_job_still_running_at_the_end_is_not_taken_for_a_blocked_loop(
    emq: redis.Redis, workers: Workers
) -> None:
    """The worker waits a moment for its threads at the end (one still runs a
    sync job past the grace): off the loop, so its watchdog never takes that
    wait for a coroutine blocking it."""
    q = backend().queue("default")
    job = enqueue_for(lane_id("USR", 1), chaos_tasks.nap, "long", 5.0)
    worker = workers.start("--concurrency", "1", "--grace", "0")
    wait_for(lambda: "long" in read_runs(workers.runs), what="the sync job running")
    worker.signal(signal.SIGTERM)
    worker.process.wait(timeout=60)  # a safety net
    assert worker.process.returncode == 0
    assert outcomes(q, job.id) == ("pending", [Outcome.RELEASED])
    assert "blocked" not in worker.output()
