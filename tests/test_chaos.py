"""Chaos: workers killed with SIGKILL every half second or so, the Valkey server
killed and restarted from its append-only file midway, and still no job is lost.

5,000 jobs over 50 lanes (one lane holds half of them) are worked by 3 worker
processes of 4 threads each. Every half second, as soon as one holds leases,
a random worker of those holding leases (a process still starting or idle
between the producer's batches has no jobs to lose) is killed and a new one
started. The
producer enqueues a batch every 0.4 s while all this happens; once a quarter
of the jobs are done, the server is killed (SIGKILL, so nothing gets flushed
on the way down), an enqueue meanwhile must be refused with ``EnqueueError``,
and the server is started again on the same port from its append-only file
(``appendfsync always``). A refused batch is retried under the same job ids,
so a retry never admits a job twice.

Every run of every job is recorded (label, worker pid, attempt) in files
outside Valkey. At the end every job is done, exactly one run per job stands
(the attempt the row says completed it), and every other run was made by a
worker this test killed: a duplicate is only ever the price of a kill.

The workers are forked from a warm parent (``tests/fork_server.py``): started
cold, the replacements would spend most of the machine on imports. The jobs
are trivially short, so the test is bounded by the kills and the 2 s lease,
not by work; one summary line is printed.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from django_emq import lane_id
from django_emq.backend import FairLanesBackend
from django_emq.engine.payload import decode
from django_emq.engine.queue import Queue
from django_emq.exceptions import EnqueueError
from tests import chaos_tasks
from tests.chaos_tasks import Run, read_runs
from tests.faults import ForkedWorker, ForkServer, RestartableServer
from tests.invariants import check_invariants, text

JOBS = 5000
LANES = 50
WORKERS = 3
CONCURRENCY = 4
KILL_EVERY = 0.5
LEASE = 2.0
BATCH = 250
#: The producer enqueues one batch this often, so it is still producing when
#: the server goes down.
PRODUCE_EVERY = 0.4
#: The server goes down once this many jobs are done (the producer is
#: usually still producing then).
MIDWAY = JOBS // 4
#: Safety limit only: the test normally ends in well under a minute.
GIVE_UP_AFTER = 150.0

pytestmark = pytest.mark.slow


@pytest.fixture
def runs_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    return folder


@pytest.fixture
def workers(
    server: RestartableServer, runs_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ForkServer]:
    # The test kills workers that hold leases, at random: on a slow machine one
    # job can be held by three victims in a row, and the workers' reaper would
    # bury it as poison after MAX_EXPIRIES (3) lost leases (seen: 4999 of 5000
    # done, one dead with LeaseExpired). The kills are the test's, not the job's:
    # the workers allow as many lost leases as attempts.
    monkeypatch.setenv("EMQ_TEST_SETTINGS", json.dumps({"MAX_EXPIRIES": 25}))
    w = ForkServer(url=server.url, runs=runs_folder, folder=tmp_path)
    yield w
    w.close()


def plan() -> list[dict[str, Any]]:
    """JOBS jobs: even ones on lane 1 (half of them), the rest spread over 49 lanes."""
    jobs = []
    for i in range(JOBS):
        n = 1 if i % 2 == 0 else 2 + (i // 2) % (LANES - 1)
        label = f"chaos{i:05d}"
        jobs.append(
            {
                "lane": lane_id("USR", n),
                "task_path": chaos_tasks.tick.module_path,
                "args": [label],
                "job_id": label,
            }
        )
    return jobs


def completed(r: redis.Redis, queue: Queue) -> int | None:
    """Jobs completed so far; ``None`` while the server is down."""
    try:
        return int(r.hget(queue.keys.stats, "completed") or 0)
    except (redis.ConnectionError, redis.TimeoutError):
        return None


def holders(r: redis.Redis, queue: Queue) -> set[int]:
    """The pids of the workers holding leases now (from the job rows' ``worker``:
    ``host:pid``); empty while the server is down."""
    try:
        ids = r.zrange(queue.keys.active, 0, -1)
        pipe = r.pipeline(transaction=False)
        for job_id in ids:
            pipe.hget(queue.keys.job(text(job_id)), "worker")
        return {int(text(w).rpartition(":")[2]) for w in pipe.execute() if w}
    except (redis.ConnectionError, redis.TimeoutError):
        return set()


def test_nothing_is_lost_when_workers_and_the_server_are_killed(
    server: RestartableServer,
    workers: ForkServer,
    runs_folder: Path,
    settings: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings.EMQ = {**settings.EMQ, "URL": server.url, "MAX_ATTEMPTS": 25}
    backend = FairLanesBackend("chaos", {"QUEUES": ["default"]})
    queue = backend.queue("default")
    r = server.client()
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    batches = [plan()[i : i + BATCH] for i in range(0, JOBS, BATCH)]
    args = ("--concurrency", str(CONCURRENCY), "--lease", str(LEASE))

    started = time.monotonic()
    give_up = started + GIVE_UP_AFTER
    refused_batches = 0
    killed: set[int] = set()
    live: list[ForkedWorker] = [workers.start(*args) for _ in range(WORKERS)]
    next_kill = next_batch = time.monotonic()
    while True:
        assert time.monotonic() < give_up, f"chaos did not finish (seed {seed})"
        if batches and time.monotonic() >= next_batch:
            try:
                queue.enqueue_many(batches[0])
                batches.pop(0)
                next_batch += PRODUCE_EVERY
            except EnqueueError:
                refused_batches += 1  # the server is down: the same ids go again next turn
        done = completed(r, queue)
        if done == JOBS and not batches:
            break
        if server.restarts == 0 and done is not None and done >= MIDWAY:

            def refused() -> None:  # down: the enqueue is refused at the call site
                with pytest.raises(EnqueueError, match="could not reach Valkey"):
                    queue.enqueue_many(batches[0] if batches else plan()[:BATCH])

            server.restart(while_down=refused)
            refused_batches += 1
        # A kill must catch a worker holding leases: workers drain each batch in
        # a few tens of milliseconds (they prefetch), so most of the time they idle.
        busy = holders(r, queue) if time.monotonic() >= next_kill else set()
        working = [w for w in live if w.working() and w.pid in busy]
        if working:
            victim = rng.choice(working)
            victim.kill()
            killed.add(victim.pid)
            live.remove(victim)
            live.append(workers.start(*args))
            next_kill = time.monotonic() + KILL_EVERY
        time.sleep(0.05)
    runtime = time.monotonic() - started

    runs = read_runs(runs_folder)
    labels = [job["job_id"] for job in plan()]
    rows = {label: queue.job(label) for label in labels}
    lost = [label for label in labels if rows[label] is None or not runs.get(label)]
    lost += [label for label, row in rows.items() if row is not None and row["state"] != "done"]
    duplicated = {label: rs for label, rs in runs.items() if len(rs) > 1}
    stats = {text(k): int(v) for k, v in r.hgetall(queue.keys.stats).items()}
    with capsys.disabled():
        print(
            f"\nchaos: jobs={JOBS} kills={len(killed)} server_restarts={server.restarts} "
            f"duplicates={len(duplicated)} lost={len(lost)} "
            f"(leases reaped={stats.get('reaped', 0)}, "
            f"refused enqueue batches={refused_batches}, runtime={runtime:.1f}s, seed={seed})"
        )

    assert lost == []
    assert server.restarts == 1
    assert stats["reaped"] > 0, "no kill caught a worker holding jobs: recovery was not exercised"
    assert set(runs) == set(labels), "a run of a job that was never enqueued"
    totals = queue.totals()
    assert (totals.pending, totals.active, totals.scheduled, totals.dead) == (0, 0, 0, 0)
    assert stats["enqueued"] == JOBS, "a retried batch admitted a job twice"
    assert stats["completed"] == JOBS
    for label in labels:
        row = rows[label]
        assert row is not None
        final = int(row["attempts"])
        standing: list[Run] = [run for run in runs[label] if run.attempt == final]
        assert len(standing) == 1, f"{label}: attempt {final} (the one that completed) ran once"
        assert decode(row["result"]) == f"{label}:{final}", f"{label}: not the standing result"
        attempts = [run.attempt for run in runs[label]]
        assert len(attempts) == len(set(attempts)), f"{label}: one attempt ran twice"
        for run in runs[label]:
            if run.attempt != final:
                assert run.pid in killed, (
                    f"{label} ran again after attempt {run.attempt} by pid {run.pid}, "
                    "a worker that was not killed"
                )
    check_invariants(queue)
