"""A worker frozen (SIGSTOP) past its lease: its job is claimed again and
completed by another worker; when the frozen one is thawed (SIGCONT) its late
completion is refused with a stale token, the first result stands, and the
thawed worker goes on to run other jobs."""

from __future__ import annotations

import signal
from pathlib import Path

import redis

from django_emq import enqueue_for, lane_id
from django_emq.engine.payload import decode
from tests import chaos_tasks
from tests.chaos_tasks import read_runs
from tests.faults import Workers
from tests.helpers import sleep_past, wait_for
from tests.invariants import check_invariants, text
from tests.test_worker import backend

A = lane_id("USR", 1)


def stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal (state ``T`` in /proc)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] == "T"


def test_frozen_worker_is_refused_and_carries_on(emq: redis.Redis, workers: Workers) -> None:
    q = backend().queue("default")
    frozen_job = enqueue_for(A, chaos_tasks.hold_first, "frozen", 3.0)
    a = workers.start("--concurrency", "2", "--lease", "1")
    wait_for(lambda: "frozen" in read_runs(workers.runs), what="the job started on worker A")

    a.signal(signal.SIGSTOP)
    wait_for(lambda: stopped(a.pid), what="worker A stopped")
    deadline = emq.zscore(q.keys.active, frozen_job.id)
    assert deadline is not None, "the job is leased to worker A"
    sleep_past(emq, int(deadline))  # A's lease has run out (by the server clock)

    b = workers.start("--burst", "--lease", "5")
    assert b.process.wait(timeout=60) == 0
    row = q.job(frozen_job.id)
    assert row is not None
    assert (row["state"], row["attempts"]) == ("done", "2")
    first_result = decode(row["result"])
    assert first_result == f"frozen:2:{b.pid}"
    assert [(run.pid, run.attempt) for run in read_runs(workers.runs)["frozen"]] == [
        (a.pid, 1),
        (b.pid, 2),
    ]

    a.signal(signal.SIGCONT)
    after = enqueue_for(A, chaos_tasks.tick, "after")
    wait_for(lambda: "lease lost to a newer attempt; outcome refused" in a.output())
    wait_for(lambda: (q.job(after.id) or {}).get("state") == "done", what="the next job done")

    assert a.alive()
    assert [(run.pid, run.attempt) for run in read_runs(workers.runs)["after"]] == [(a.pid, 1)]
    row = q.job(frozen_job.id)
    assert row is not None
    assert (row["state"], row["attempts"], decode(row["result"])) == ("done", "2", first_result)
    late = f"job={frozen_job.id} task=tests.chaos_tasks.hold_first attempt=1"
    wait_for(lambda: late in a.output(), what="A's outcome line for the frozen job")
    assert f"{late} " in a.output()
    assert next(line for line in a.output().splitlines() if late in line).endswith("stale")
    stats = {text(k): int(v) for k, v in emq.hgetall(q.keys.stats).items()}
    assert stats["completed"] == 2, "the late completion was not counted"
    a.signal(signal.SIGTERM)
    assert a.process.wait(timeout=30) == 0
    check_invariants(q)


def test_a_thawed_worker_starts_none_of_the_jobs_it_had_claimed_ahead(
    emq: redis.Redis, workers: Workers
) -> None:
    """Short jobs make the worker claim ahead; it freezes while it runs a long one
    with jobs claimed behind it. Their leases run out and another worker runs
    them. Thawed, the first worker starts none of them: each ran once."""
    q = backend().queue("default")
    for i in range(40):
        enqueue_for(A, chaos_tasks.tick, f"warm{i}")
    enqueue_for(A, chaos_tasks.hold_first, "gate", 3.0)
    behind = [enqueue_for(A, chaos_tasks.tick, f"x{i}") for i in range(12)]
    a = workers.start("--concurrency", "1", "--lease", "1")
    wait_for(lambda: "gate" in read_runs(workers.runs), what="the long job started on A")
    held = [job.id for job in behind if (q.job(job.id) or {}).get("state") == "active"]
    assert held, "A claimed jobs ahead of the long one"
    a.signal(signal.SIGSTOP)
    wait_for(lambda: stopped(a.pid), what="worker A stopped")
    deadlines = [emq.zscore(q.keys.active, job_id) for job_id in held]
    sleep_past(emq, int(max(d or 0 for d in deadlines)))  # their leases have run out

    b = workers.start("--burst", "--lease", "5")
    assert b.process.wait(timeout=60) == 0
    a.signal(signal.SIGCONT)
    wait_for(lambda: "task=tests.chaos_tasks.hold_first attempt=1" in a.output(), what="A's gate")
    runs = read_runs(workers.runs)
    for job_id in held:
        label = f"x{behind.index(next(j for j in behind if j.id == job_id))}"
        assert [(run.pid, run.attempt) for run in runs[label]] == [(b.pid, 2)], label
    wait_for(
        lambda: a.output().count("not started") == len(held), what="A's lines for the jobs it held"
    )
    assert a.alive()
    a.signal(signal.SIGTERM)
    assert a.process.wait(timeout=30) == 0
    check_invariants(q)
