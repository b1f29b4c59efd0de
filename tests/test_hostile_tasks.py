"""Task modules that fail at import, met by a real worker process: whatever the
import raises (an exception, a syntax error, ``sys.exit()``, even
``KeyboardInterrupt``), the job is
retried like a failure and dead after MAX_ATTEMPTS, with the cause in its
error and a traceback in the log; the jobs claimed with it are not charged,
and the worker goes on serving the other tasks. A periodic schedule naming
such a task, or one whose tick fails, never stops the worker's beat."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from django_emq import enqueue_for, lane_id
from django_emq.engine.queue import Queue
from tests import chaos_tasks
from tests.chaos_tasks import read_runs
from tests.faults import ROOT, Workers
from tests.helpers import wait_for
from tests.invariants import check_invariants
from tests.test_worker import backend

#: Task path -> the class of what importing its module raises.
HOSTILE = {
    "tests.hostile_raises.job": "builtins.RuntimeError",
    "tests.hostile_config.job": "django.core.exceptions.ImproperlyConfigured",
    "tests.hostile_env.call_api": "builtins.KeyError",
    "tests.hostile_exits.job": "builtins.SystemExit",
    "tests.hostile_interrupts.job": "builtins.KeyboardInterrupt",
    "hostile_syntax.job": "builtins.SyntaxError",  # written by the fixture (no lint can read it)
}


A = lane_id("USR", 1)


def make_workers(url: str, folder: Path, **emq: Any) -> Workers:
    """Workers that can import ``hostile_syntax`` (a module with a syntax
    error, written to ``folder``) and run with ``emq`` over the test settings."""
    modules = folder / "modules"
    modules.mkdir(parents=True)
    (modules / "hostile_syntax.py").write_text("def job(:\n    pass\n")
    env = {
        "PYTHONPATH": f"{ROOT}{os.pathsep}{modules}",
        "EMQ_TEST_SETTINGS": json.dumps(emq),
    }
    return Workers(url, folder, env)


@pytest.fixture
def workers(emq: redis.Redis, settings: Any, tmp_path: Path) -> Iterator[Workers]:
    w = make_workers(settings.EMQ["URL"], tmp_path, MAX_ATTEMPTS=3)
    yield w
    w.close()


def state(q: Queue, job_id: str) -> str:
    return (q.job(job_id) or {}).get("state", "")


def test_a_task_module_that_fails_at_import_goes_dead_and_the_worker_goes_on(
    emq: redis.Redis, workers: Workers
) -> None:
    q = backend().queue("default")
    lanes = [lane_id("USR", n) for n in range(1, len(HOSTILE) + 1)]
    hostile = {
        path: q.enqueue(lane, path).job_id for lane, path in zip(lanes, HOSTILE, strict=True)
    }
    bystanders = [
        enqueue_for(lane, chaos_tasks.tick, f"{lane}-{i}") for lane in lanes for i in range(3)
    ]
    worker = workers.start("--concurrency", "1", "--lease", "2")
    wait_for(
        lambda: (
            all(state(q, job) == "dead" for job in hostile.values())
            and all(state(q, job.id) == "done" for job in bystanders)
        ),
        timeout=60,
        what="the hostile jobs dead and the others done",
    )
    assert worker.alive()
    log = worker.output()
    for path, exception in HOSTILE.items():
        row = q.job(hostile[path])
        assert row is not None
        assert (row["fails"], row.get("expiries", "0")) == ("3", "0"), row
        errors = [json.loads(e) for e in json.loads(row["errors"])]
        assert [e["exception_class_path"] for e in errors] == [exception] * 3
        module = path.rpartition(".")[0]
        assert f"cannot load task {path}: importing {module} raised" in errors[-1]["traceback"]
        assert "Traceback (most recent call last)" in errors[-1]["traceback"]
        assert f"importing {module} raised" in log
    assert log.count("Traceback (most recent call last)") >= 3 * len(HOSTILE)
    # The jobs claimed with them were not charged: each ran once, no lease expired.
    runs = read_runs(workers.runs)
    for job in bystanders:
        assert (q.job(job.id) or {}).get("expiries", "0") == "0"
    assert sorted(runs) == sorted(f"{lane}-{i}" for lane in lanes for i in range(3))
    assert all(len(r) == 1 for r in runs.values())
    # Still serving.
    late = enqueue_for(lanes[0], chaos_tasks.tick, "late")
    wait_for(lambda: state(q, late.id) == "done", what="a job enqueued after them done")
    assert worker.alive()
    check_invariants(q)


def test_a_broken_schedule_never_stops_the_beat(
    emq: redis.Redis, settings: Any, tmp_path: Path
) -> None:
    """Every second: a schedule of a task whose module raises at import (check
    refuses it; past ``--skip-checks`` its ticks go dead like any such job), one
    whose tick fails (its last tick unreadable: skipped, logged once), and a
    fine one, which goes on ticking; so does the worker."""
    q = backend().queue("default")
    every_second = {
        name: {"task": task, "cron": "* * * * * *", "lane": lane_id("SYS", n), "args": args}
        for n, (name, task, args) in enumerate(
            [
                ("hostile", "tests.hostile_raises.job", []),
                ("corrupt", chaos_tasks.tick.module_path, ["corrupt"]),
                ("fine", chaos_tasks.tick.module_path, ["fine"]),
            ],
            start=1,
        )
    }
    emq.hset(q.keys.ticks, "corrupt", "not a number")
    scheduled = make_workers(settings.EMQ["URL"], tmp_path, MAX_ATTEMPTS=1, SCHEDULES=every_second)
    try:
        refused = scheduled.start("--concurrency", "1")
        wait_for(lambda: not refused.alive(), what="the worker refused by its checks")
        assert "emq.E009" in refused.output()
        assert "Schedule 'hostile' names task 'tests.hostile_raises.job'" in refused.output()

        worker = scheduled.start("--concurrency", "1", "--skip-checks")
        wait_for(
            lambda: len(read_runs(scheduled.runs).get("fine", [])) >= 3 and q.totals().dead >= 2,
            timeout=30,
            what="three ticks of the fine schedule run, two of the hostile one dead",
        )
        assert worker.alive()
        log = worker.output()
        assert log.count("schedule corrupt: skipped, its tick failed") == 1
        assert "corrupt" not in read_runs(scheduled.runs)
        check_invariants(q)
    finally:
        scheduled.close()


def test_a_coroutine_that_stops_the_event_loop_fails_its_job_not_the_worker(
    emq: redis.Redis, workers: Workers
) -> None:
    """``asyncio.get_running_loop().stop()`` raises in the task: its job fails
    (dead after MAX_ATTEMPTS), the worker's loop runs on and serves the rest."""
    q = backend().queue("default")
    stopper = enqueue_for(A, chaos_tasks.stops_the_loop, "stopper")
    behind = enqueue_for(A, chaos_tasks.tick, "behind")
    worker = workers.start("--concurrency", "2", "--burst")
    worker.process.wait(timeout=60)  # a safety net
    log = worker.output()
    assert worker.process.returncode == 0, log
    row = q.job(stopper.id)
    assert row is not None
    assert (row["state"], row["fails"], row.get("expiries", "0")) == ("dead", "3", "0")
    error = json.loads(json.loads(row["errors"])[-1])
    assert error["exception_class_path"] == "builtins.RuntimeError"
    assert "must not stop the worker's event loop" in error["traceback"]
    assert state(q, behind.id) == "done"
    assert [run.attempt for run in read_runs(workers.runs)["stopper"]] == [1, 2, 3]
    assert "Event loop stopped before Future completed" not in log
    check_invariants(q)
