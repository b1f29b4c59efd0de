"""The loop watchdog, with real worker processes: a coroutine task that blocks
the event loop (``time.sleep`` in a coroutine) for longer than the lease is
named, with its stack, once; the jobs that finished on the worker's threads
meanwhile, waiting only to be recorded, keep their leases and are recorded,
so no job runs twice although another worker reaps expired leases all along."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from django_emq import enqueue_for, lane_id
from tests import chaos_tasks
from tests.chaos_tasks import read_runs
from tests.faults import Workers
from tests.helpers import wait_for
from tests.invariants import check_invariants
from tests.test_worker import backend


@pytest.fixture
def workers(emq: redis.Redis, settings: Any, tmp_path: Path) -> Iterator[Workers]:
    w = Workers(settings.EMQ["URL"], tmp_path)
    yield w
    w.close()


def test_a_blocked_loop_is_named_and_loses_no_finished_job(
    emq: redis.Redis, workers: Workers
) -> None:
    q = backend().queue("default")
    blocker = enqueue_for(lane_id("USR", 1), chaos_tasks.blocks_the_loop, "blocker", 5.0)
    lanes = [lane_id("USR", n) for n in range(2, 8)]
    bystanders = [
        enqueue_for(lane, chaos_tasks.nap, f"{lane}-{i}", 0.2) for i in range(5) for lane in lanes
    ]
    started = [workers.start("--concurrency", "4", "--lease", "3") for _ in range(2)]
    jobs = [blocker, *bystanders]
    wait_for(
        lambda: all((q.job(job.id) or {}).get("state") == "done" for job in jobs),
        timeout=90,
        what="every job done",
    )
    runs = read_runs(workers.runs)
    assert {label: len(r) for label, r in runs.items() if len(r) != 1} == {}
    assert sorted(runs) == sorted(str(job.args[0]) for job in jobs)
    logs = [w.output() for w in started]
    (log,) = [text for text in logs if f"job={blocker.id}" in text]
    named = re.findall(r"the event loop has been blocked for .* by job (\S+) \(task (\S+),", log)
    assert named == [(blocker.id, chaos_tasks.blocks_the_loop.module_path)]
    assert "time.sleep(seconds)" in log  # its stack
    assert not any("outcome=stale" in text for text in logs)
    check_invariants(q)
