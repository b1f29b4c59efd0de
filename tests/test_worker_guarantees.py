"""What the rebuilt worker promises, tried on real worker processes: weights that
hold for slow jobs, hundreds of coroutine jobs in flight at once, a bad result
that harms only its own job, heartbeats of dead workers pruned."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest
import redis
from django.core.management import call_command

from django_emq import lane_id
from django_emq.engine.rows import parse_heartbeat
from django_emq.worker.beat import PRUNE_AFTER_BEATS
from tests.faults import Workers
from tests.helpers import wait_for
from tests.invariants import check_invariants, text
from tests.test_worker import ROOT, backend, runs

pytestmark = pytest.mark.django_db
A, B = lane_id("USR", 1), lane_id("USR", 2)


def burst(*extra: str) -> None:
    call_command("run_emq_worker", "--burst", "--lease", "5", *extra, verbosity=0)


# -- weights hold for slow jobs ---------------------------------------------------


def test_weights_3_to_1_hold_for_50ms_jobs_on_a_real_worker(
    emq: redis.Redis, workers: Workers
) -> None:
    """Slow jobs are claimed one at a time, and the heavy lane still gets three
    jobs per turn of the ring (it keeps the rest of its turn between claims)."""
    q = backend().queue("default")
    for lane, name in ((A, "a"), (B, "b")):
        q.enqueue_many(
            [{"lane": lane, "task_path": "tests.tasks.slow", "args": [f"{name}{i}", 0.05]}
             for i in range(150)]
        )  # fmt: skip
    q.set_weight(A, 3)
    worker = workers.start("--concurrency", "2")
    wait_for(lambda: len(started(emq)) >= 120, timeout=60, what="120 jobs started")
    worker.signal(signal.SIGTERM)
    first = Counter(label[0] for label in started(emq)[:120])
    assert 2.55 <= first["a"] / first["b"] <= 3.45, first  # 3:1 +- 15 %
    assert worker.process.wait(timeout=30) == 0


def started(r: redis.Redis) -> list[str]:
    return [x.removeprefix("start:") for x in runs(r) if x.startswith("start:")]


# -- coroutines on the loop ---------------------------------------------------------


def test_500_coroutine_jobs_run_at_once_each_once(emq: redis.Redis) -> None:
    q = backend().queue("default")
    q.enqueue_many(
        [{"lane": lane_id("USR", i % 50), "task_path": "tests.tasks.async_nap",
          "args": [f"n{i}", 1.0]} for i in range(500)]
    )  # fmt: skip
    burst("--concurrency", "500")
    assert sorted(runs(emq)) == sorted(f"n{i}" for i in range(500))
    assert int(emq.get("test:peak") or 0) >= 450, "most of the 500 were in flight at once"
    assert q.totals().pending == q.totals().active == 0
    check_invariants(q)


# -- a bad result harms only its own job ----------------------------------------------


@pytest.mark.parametrize(
    ("task", "args", "error"),
    [
        ("surrogate", [], "lone surrogate"),
        ("not_a_number", [], "Out of range float values"),
        ("huge", [2 * 1024 * 1024], "over the 1048576-byte limit"),
        ("deep", [100_000], "nested too deeply"),
    ],
)
def test_a_result_valkey_cannot_keep_fails_only_its_job(
    emq: redis.Redis, settings: Any, task: str, args: list[Any], error: str
) -> None:
    settings.EMQ = {**settings.EMQ, "MAX_ATTEMPTS": 2}
    q = backend().queue("default")
    bad = q.enqueue(A, f"tests.tasks.{task}", args)
    good = q.enqueue_many(
        [{"lane": lane_id("USR", 2 + i % 5), "task_path": "tests.tasks.record",
          "args": [f"g{i}"]} for i in range(20)]
    )  # fmt: skip
    burst("--concurrency", "2")
    row = q.job(bad.job_id)
    assert row is not None
    assert (row["state"], row["attempts"]) == ("dead", "2")
    assert error in json.loads(row["error"])["traceback"]
    assert all((q.job(e.job_id) or {}).get("state") == "done" for e in good)
    assert sorted(runs(emq)) == sorted(f"g{i}" for i in range(20))
    check_invariants(q)


def test_a_surrogate_result_kills_no_worker_and_no_other_job(
    emq: redis.Redis, workers: Workers
) -> None:
    """Among 50 short jobs recorded together, one whose result has a lone
    surrogate ends dead; the 50 complete once; the worker stays up."""
    q = backend().queue("default")
    lanes = [lane_id("USR", 2 + i) for i in range(10)]
    good = q.enqueue_many(
        [{"lane": lanes[i % 10], "task_path": "tests.tasks.record", "args": [f"g{i}"]}
         for i in range(25)]
    )  # fmt: skip
    bad = q.enqueue(A, "tests.tasks.surrogate")
    good += q.enqueue_many(
        [{"lane": lanes[i % 10], "task_path": "tests.tasks.record", "args": [f"g{i}"]}
         for i in range(25, 50)]
    )  # fmt: skip
    worker = workers.start("--concurrency", "4")
    wait_for(lambda: (q.job(bad.job_id) or {}).get("state") == "dead", what="the bad job dead")
    wait_for(
        lambda: all((q.job(e.job_id) or {}).get("state") == "done" for e in good),
        what="the 50 others done",
    )
    assert sorted(runs(emq)) == sorted(f"g{i}" for i in range(50)), "each ran once"
    assert worker.alive()
    assert "lone surrogate" in worker.output()
    worker.signal(signal.SIGTERM)
    assert worker.process.wait(timeout=30) == 0
    check_invariants(q)


# -- heartbeats ------------------------------------------------------------------------


def test_heartbeats_of_killed_workers_are_pruned_by_a_live_one(
    emq: redis.Redis, workers: Workers, settings: Any
) -> None:
    q = backend().queue("default")
    doomed = [workers.start("--concurrency", "1") for _ in range(3)]
    ids = {f"{socket.gethostname()}:{w.pid}" for w in doomed}
    wait_for(lambda: ids <= beating(emq, q.keys.workers), what="three workers beating")
    for w in doomed:
        w.kill()
    survivor = workers.start("--concurrency", "1")
    wait_for(survivor.working, what="a live worker")
    wait_for(
        lambda: not ids & beating(emq, q.keys.workers),
        timeout=PRUNE_AFTER_BEATS * float(settings.EMQ["BEAT"]) + 10,
        what=f"the dead ones pruned within {PRUNE_AFTER_BEATS} beats",
    )
    assert f"{socket.gethostname()}:{survivor.pid}" in beating(emq, q.keys.workers)


def test_a_heartbeat_says_what_the_workers_page_shows(emq: redis.Redis, workers: Workers) -> None:
    """The queues a worker serves, its concurrency, its failures and its start
    are in its heartbeat (the admin's workers page reads them)."""
    q = backend().queue("default")
    w = workers.start("--concurrency", "3")
    worker_id = f"{socket.gethostname()}:{w.pid}"
    wait_for(lambda: worker_id in beating(emq, q.keys.workers), what="the worker beating")
    beat = parse_heartbeat(worker_id, emq.hget(q.keys.workers, worker_id))
    assert "default" in beat.queues
    assert beat.concurrency == 3
    assert beat.failed == 0
    assert beat.started_ms is not None
    assert beat.beat_ms is not None
    assert beat.started_ms <= beat.beat_ms + 1_000  # the beat is on the server's clock


def beating(r: redis.Redis, key: str) -> set[str]:
    return {text(k) for k in r.hkeys(key)}


# -- logging -------------------------------------------------------------------------


def burst_under_default_logging() -> str:
    """A ``--burst`` worker under Django's default LOGGING
    (``tests.logging_settings``): what it wrote to stderr."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.logging_settings",
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(
        [sys.executable, "-m", "django", "run_emq_worker", "--burst"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=True,
    ).stderr  # fmt: skip


def test_one_line_per_job_under_djangos_default_logging(emq: redis.Redis) -> None:
    """A project that leaves Django's default LOGGING in place (DEBUG on) gets
    each job's line once, and the worker's start line once (Django's own
    per-job lines show from ``-v 2`` on, once: see test_process in contract)."""
    q = backend().queue("default")
    done = q.enqueue(A, "tests.tasks.add", [1, 2])
    failing = q.enqueue(B, "tests.tasks.boom", ["b"])
    out = burst_under_default_logging()
    lines = out.splitlines()
    assert len([line for line in lines if f"job={done.job_id}" in line]) == 1, out
    retry = [line for line in lines if f"job={failing.job_id}" in line and "attempt=1" in line]
    assert len(retry) == 1, out
    assert "error=RuntimeError('boom b') outcome=retry" in retry[0]
    assert len([line for line in lines if ", concurrency 1 " in line]) == 1, out
    assert "Task id=" not in out, "Django's own per-job lines say it again"


def test_a_dead_jobs_error_line_carries_its_traceback(emq: redis.Redis) -> None:
    """The ERROR line of a job that goes dead is followed by the task's
    traceback (the one recorded on the job), as ``logger.exception`` prints it."""
    q = backend().queue("default")
    failing = q.enqueue(B, "tests.tasks.boom", ["dead"])
    out = burst_under_default_logging()
    lines = out.splitlines()
    ours = [i for i, line in enumerate(lines) if f"job={failing.job_id}" in line]
    at = ours[-1]  # retried until it has failed MAX_ATTEMPTS times (3), then dead
    assert " ERROR " in lines[at], out
    assert lines[at].endswith("outcome=dead"), out
    assert all("Traceback" not in line for line in lines[:at]), "a retry's line has none"
    below = lines[at + 1 :]
    assert below[0] == "Traceback (most recent call last):", out
    assert any(line.endswith(", in boom") for line in below), out
    assert "RuntimeError: boom dead" in below, out
