"""Prefetch: a job thread claims several short jobs at once and records their
successes together, without changing the order lanes are served in, and
without holding a finished job's outcome back behind a long one."""

from __future__ import annotations

import subprocess
import threading
from typing import Any

import pytest
import redis
from django.core.management import call_command
from django.tasks import task_backends

from django_emq import lane_id
from django_emq.backend import FairLanesBackend
from django_emq.engine.queue import Queue
from django_emq.worker import Worker, WorkerOptions
from django_emq.worker import window as worker_window
from tests.helpers import wait_for
from tests.invariants import check_invariants
from tests.test_worker import processes, runs, worker_process

pytestmark = pytest.mark.django_db
__all__ = ["processes"]  # the fixture, shared with test_worker

LANES = [lane_id("USR", n) for n in range(20)]


def queue() -> Queue:
    backend = task_backends["default"]
    assert isinstance(backend, FairLanesBackend)
    return backend.queue("default")


def fill(per_lane: int, task: str = "tests.tasks.record", *extra: Any) -> None:
    queue().enqueue_many(
        [
            {"lane": lane, "task_path": task, "args": [f"{lane}:{n}", *extra]}
            for n in range(per_lane)
            for lane in LANES
        ]
    )


def script_calls(r: redis.Redis) -> int:
    """Script calls the server ran (the engine runs its scripts with ``FCALL``)."""
    stats: dict[str, Any] = r.info("commandstats")
    return int(stats["cmdstat_fcall"]["calls"])


def burst(*extra: str) -> None:
    call_command("run_emq_worker", "--burst", "--concurrency", "1", *extra, verbosity=0)


def test_short_jobs_are_claimed_and_recorded_many_at_a_time(emq: redis.Redis) -> None:
    fill(20)  # 400 jobs, 20 lanes
    emq.config_resetstat()
    burst()
    # a claim and a record per job would be 800; claims of 4 jobs on average, 200
    # (a loaded machine slows the jobs, so claims grow less: the bound leaves room)
    assert script_calls(emq) <= 200
    order = runs(emq)
    assert sorted(order) == sorted(f"{lane}:{n}" for n in range(20) for lane in LANES)
    # still one head per lane per turn: each run of 20 serves every lane once
    for turn in range(20):
        served = order[turn * 20 : (turn + 1) * 20]
        assert sorted(served) == sorted(f"{lane}:{turn}" for lane in LANES)
    totals = queue().totals()
    assert (totals.pending, totals.active) == (0, 0)
    assert int(emq.hget(queue().keys.stats, "completed") or 0) == 400
    check_invariants(queue())


def test_prefetch_1_claims_one_job_at_a_time(emq: redis.Redis) -> None:
    fill(5)  # 100 jobs
    emq.config_resetstat()
    burst("--prefetch", "1")
    # One claim per job (a job's success rides along with the next claim, in
    # the same script call): at least 100 calls, where prefetching would
    # take the 100 jobs in a handful.
    assert script_calls(emq) >= 100
    assert len(runs(emq)) == 100


def test_long_jobs_are_claimed_one_at_a_time(emq: redis.Redis) -> None:
    # 15 ms each: longer than a claim's target, so a claim never takes two
    fill(1, "tests.tasks.slow", 0.015)
    emq.config_resetstat()
    burst()
    assert script_calls(emq) >= 2 * 20
    assert len(runs(emq)) == 2 * 20


def test_a_success_is_recorded_while_the_thread_runs_a_long_job(
    emq: redis.Redis, processes: list[subprocess.Popen[bytes]]
) -> None:
    """The jobs claimed with a long one are recorded while it runs, not after."""
    fill(4)  # 80 short jobs, then the gate on the first lane
    gate = queue().enqueue(LANES[0], "tests.tasks.gate", ["gate", "test:open"])
    p = worker_process("--burst")
    processes.append(p)
    wait_for(lambda: "start:gate" in runs(emq), what="the gate job started")
    short = [r for r in runs(emq) if not r.startswith(("start:", "end:"))]
    assert len(short) == 80
    wait_for(
        lambda: int(emq.hget(queue().keys.stats, "completed") or 0) == 80,
        what="every short job recorded while the gate job runs",
    )
    row = queue().job(gate.job_id)
    assert row is not None
    assert row["state"] == "active"
    emq.set("test:open", 1)
    assert p.wait(timeout=30) == 0
    row = queue().job(gate.job_id)
    assert row is not None
    assert row["state"] == "done"
    check_invariants(queue())


def test_prefetch_above_the_limit_is_a_command_error(emq: redis.Redis) -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--prefetch: must be at most 1000"):
        burst("--prefetch", "1001")


def test_stopping_releases_prefetched_jobs_at_once(
    emq: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Jobs claimed ahead behind a long one go back to the head of their lane as
    soon as the worker is told to stop; the long one finishes in its grace."""
    monkeypatch.setattr(worker_window, "BATCH_TARGET", 60.0)  # every job counts as short
    q = queue()
    lane = LANES[0]
    q.enqueue_many(
        [{"lane": lane, "task_path": "tests.tasks.record", "args": [f"r{i}"]} for i in range(3)]
    )
    gate = q.enqueue(lane, "tests.tasks.gate", ["gate", "test:open"])
    behind = q.enqueue_many(
        [{"lane": lane, "task_path": "tests.tasks.record", "args": [f"x{i}"]} for i in range(5)]
    )
    backend = task_backends["default"]
    assert isinstance(backend, FairLanesBackend)
    worker = Worker(backend, WorkerOptions(concurrency=1, prefetch=4, grace=30))
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for(lambda: "start:gate" in runs(emq), what="the gate job started")
        # [r0], then [r1, r2, gate, x0], then [x1, x2] while the gate job runs:
        # the claim ahead fills the worker's four (gate, x0, x1, x2) a moment
        # after the gate job starts, so wait for it rather than race it
        held = [e.job_id for e in behind[:3]]
        wait_for(
            lambda: [state(q, job_id) for job_id in held] == ["active"] * 3,
            what="three jobs claimed ahead behind the gate job",
        )
        assert [state(q, e.job_id) for e in behind[3:]] == ["pending"] * 2, "at most four held"
        worker.stop()
        wait_for(
            lambda: [state(q, job_id) for job_id in held] == ["pending"] * 3,
            what="the prefetched jobs released while the gate job runs",
        )
        assert state(q, gate.job_id) == "active"
    finally:
        # stop the worker whatever failed above: a worker thread left running
        # would go on claiming the jobs of every later test in this process
        worker.stop()
        emq.set("test:open", 1)
        thread.join(30)
    assert not thread.is_alive()
    assert state(q, gate.job_id) == "done"
    assert [r for r in runs(emq) if r.startswith("x")] == []
    check_invariants(q)


def state(q: Queue, job_id: str) -> str:
    row = q.job(job_id)
    assert row is not None
    return str(row["state"])


def test_jobs_held_behind_a_long_sync_job_keep_their_leases(emq: redis.Redis) -> None:
    """With one thread, a sync job that blocks (here 3 s, twice the lease) holds
    back the jobs claimed ahead with it. The beat goes on extending every lease
    the worker holds, so none of them expires, none runs twice, and each
    completes once the long one is done."""
    q = queue()
    lane = LANES[0]
    q.enqueue_many(
        [{"lane": lane, "task_path": "tests.tasks.record", "args": [f"a{i}"]} for i in range(60)]
    )
    slow = q.enqueue(lane, "tests.tasks.slow", ["slow", 3.0])
    behind = q.enqueue_many(
        [{"lane": lane, "task_path": "tests.tasks.record", "args": [f"b{i}"]} for i in range(20)]
    )
    burst("--lease", "1.5")
    order = runs(emq)
    assert sorted(order) == sorted(
        [f"a{i}" for i in range(60)] + ["start:slow", "end:slow"] + [f"b{i}" for i in range(20)]
    )
    assert order.index("end:slow") < order.index("b0")
    rows = [q.job(e.job_id) for e in [slow, *behind]]
    assert all(row is not None and row["state"] == "done" for row in rows)
    assert {row["attempts"] for row in rows if row is not None} == {"1"}
    # the first jobs behind it were claimed while it ran, and held past one lease
    first = q.job(behind[0].job_id)
    assert first is not None
    assert int(first["finished"]) - int(first["claimed"]) > 1500
    assert emq.zcard(q.keys.active) == 0
    check_invariants(q)


def test_a_blocking_sync_job_holds_back_no_job_the_other_threads_can_take(
    emq: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sync jobs wait in one line the threads take from: while one thread is
    held by a job that blocks, the jobs claimed with it and after it run on the
    other thread, however short the jobs so far (no chunk goes down with it)."""
    monkeypatch.setattr(worker_window, "BATCH_TARGET", 60.0)  # every job counts as short
    q = queue()
    lane = LANES[0]
    q.enqueue_many(
        [{"lane": lane, "task_path": "tests.tasks.record", "args": [f"a{i}"]} for i in range(40)]
    )
    gate = q.enqueue(lane, "tests.tasks.gate", ["gate", "test:open"])
    q.enqueue_many(
        [{"lane": lane, "task_path": "tests.tasks.record", "args": [f"b{i}"]} for i in range(40)]
    )
    backend = task_backends["default"]
    assert isinstance(backend, FairLanesBackend)
    worker = Worker(backend, WorkerOptions(concurrency=2, burst=True))
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for(
            lambda: len([r for r in runs(emq) if r[0] in "ab"]) == 80,
            what="every short job run while the gate job blocks a thread",
        )
        assert "start:gate" in runs(emq)
        assert "end:gate" not in runs(emq)
        assert state(q, gate.job_id) == "active"
        emq.set("test:open", 1)
        thread.join(30)  # a burst run: it ends once the gate job is done
    finally:
        if thread.is_alive():  # never left running: it would claim later tests' jobs
            worker.stop()
            emq.set("test:open", 1)
            thread.join(30)
    assert not thread.is_alive()
    assert state(q, gate.job_id) == "done"
    check_invariants(q)
