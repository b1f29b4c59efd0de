"""The loop watchdog, with real worker processes: a coroutine task that blocks
the event loop (``time.sleep`` in a coroutine), or a task module whose import
hangs on it, is named, with its stack, once per stall; the jobs that finished
on the worker's threads meanwhile, waiting only to be recorded, keep their
leases and are recorded, so none runs twice although another worker reaps
expired leases all along; the job blocking the loop for a whole lease is
charged an expiry, and it alone."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path
from typing import Any

import redis

from django_emq import enqueue_for, lane_id
from django_emq.engine.queue import Queue
from django_emq.exceptions import LeaseExpired
from tests import chaos_tasks
from tests.chaos_tasks import read_runs
from tests.faults import Workers
from tests.helpers import wait_for
from tests.invariants import check_invariants
from tests.test_worker import backend


def row_of(q: Queue, job_id: str) -> dict[str, str]:
    row = q.job(job_id)
    assert row is not None
    return row


def last_error_class(row: dict[str, str]) -> str:
    return str(json.loads(json.loads(row["errors"])[-1])["exception_class_path"])


def test_a_blocked_loop_is_named_and_loses_no_finished_job(
    emq: redis.Redis, workers: Workers
) -> None:
    """The blocker blocks each worker running it for longer than the lease: each
    time, once the loop has been blocked for a whole lease, its lease ends,
    counted as an expiry, so it ends dead after ``MAX_EXPIRIES``; the jobs that
    finished beside it meanwhile keep their leases and are recorded, none
    charged, none run twice."""
    q = backend().queue("default")
    blocker = enqueue_for(lane_id("USR", 1), chaos_tasks.blocks_the_loop, "blocker", 5.0)
    lanes = [lane_id("USR", n) for n in range(2, 8)]
    bystanders = [
        enqueue_for(lane, chaos_tasks.nap, f"{lane}-{i}", 0.2) for i in range(5) for lane in lanes
    ]
    started = [workers.start("--concurrency", "4", "--lease", "3") for _ in range(2)]
    wait_for(
        lambda: (
            row_of(q, blocker.id).get("state") == "dead"
            and all(row_of(q, job.id).get("state") == "done" for job in bystanders)
        ),
        timeout=90,
        what="the blocker dead, every other job done",
    )
    row = row_of(q, blocker.id)
    assert (row["expiries"], row.get("fails", "0")) == ("3", "0")  # MAX_EXPIRIES
    assert last_error_class(row) == f"{LeaseExpired.__module__}.LeaseExpired"
    assert {job.id: row_of(q, job.id).get("expiries", "0") for job in bystanders} == {
        job.id: "0" for job in bystanders
    }
    runs = read_runs(workers.runs)
    assert len(runs.pop("blocker")) == 3
    assert {label: len(r) for label, r in runs.items() if len(r) != 1} == {}
    assert sorted(runs) == sorted(str(job.args[0]) for job in bystanders)
    logs = "".join(w.output() for w in started)
    named = re.findall(r"the event loop has been blocked for .* by job (\S+) \(task (\S+),", logs)
    assert set(named) == {(blocker.id, chaos_tasks.blocks_the_loop.module_path)}
    assert "time.sleep(seconds)" in logs  # its stack
    charged = re.findall(r"job (\S+) \(task \S+, lane \S+\) has blocked the event loop", logs)
    assert charged == [blocker.id] * 3
    stale = re.findall(r"job=(\S+) .*outcome=stale", logs)
    assert set(stale) <= {blocker.id}  # a run that ended after its charge: refused
    check_invariants(q)


def test_a_task_module_whose_import_hangs_is_named_and_charged_not_its_claim(
    emq: redis.Redis, settings: Any, tmp_path: Path
) -> None:
    """The import runs on the loop: the watchdog names the job importing, keeps
    the leases of the jobs claimed with it, and charges the culprit alone once
    it has blocked the loop for a lease (dead after ``MAX_EXPIRIES``, 2 here).
    Its wedged workers, stopped, release the others uncharged and exit 1."""
    workers = Workers(
        settings.EMQ["URL"], tmp_path, {"EMQ_TEST_SETTINGS": json.dumps({"MAX_EXPIRIES": 2})}
    )
    q = backend().queue("default")
    culprit = q.enqueue(lane_id("USR", 1), "tests.hostile_hang.job").job_id
    bystanders = [enqueue_for(lane_id("USR", n), chaos_tasks.tick, f"b{n}") for n in range(2, 5)]
    args = ("--concurrency", "4", "--lease", "2", "--grace", "0")
    try:
        wedged = [workers.start(*args)]
        wait_for(lambda: row_of(q, culprit).get("expiries") == "1", what="the culprit charged")
        wedged.append(workers.start(*args))
        wait_for(lambda: row_of(q, culprit).get("state") == "dead", what="the culprit dead")
        for worker in wedged:
            worker.signal(signal.SIGTERM)
        for worker in wedged:
            worker.process.wait(timeout=60)  # a safety net: grace 0, margin 10 s
        workers.start("--concurrency", "4")
        wait_for(
            lambda: all(row_of(q, job.id).get("state") == "done" for job in bystanders),
            what="every other job done",
        )
    finally:
        workers.close()
    assert [w.process.returncode for w in wedged] == [1, 1]
    row = row_of(q, culprit)
    assert (row["expiries"], row.get("fails", "0")) == ("2", "0")
    assert last_error_class(row) == f"{LeaseExpired.__module__}.LeaseExpired"
    assert [row_of(q, job.id).get("expiries", "0") for job in bystanders] == ["0"] * 3
    runs = read_runs(workers.runs)
    assert {label: len(r) for label, r in runs.items()} == {f"b{n}": 1 for n in range(2, 5)}
    logs = "".join(w.output() for w in wedged)
    lane = lane_id("USR", 1)
    importing = f"by job {culprit} (importing task tests.hostile_hang.job, lane {lane})"
    assert len(re.findall(rf"has been blocked for [\d.]+s {re.escape(importing)}", logs)) == 2
    assert f"(its event loop blocked {importing})" in logs
    assert "by task 'Task-" not in logs
    check_invariants(q)
