"""A worker whose Valkey server goes away under it (killed, then started again
from its append-only file on the same port) rides the outage out: it backs
off, reconnects, records the outcomes of the jobs it was running, and goes on,
with no job lost and none run twice."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from django_emq import lane_id
from django_emq.backend import FairLanesBackend
from django_emq.engine.queue import Queue
from django_emq.worker.watchdog import HARD_MARGIN
from tests import chaos_tasks
from tests.chaos_tasks import read_runs
from tests.faults import RestartableServer, Workers
from tests.helpers import wait_for
from tests.invariants import check_invariants
from tests.worker_parts import worker_parts

JOBS = 12
LANES = 4


@pytest.fixture
def workers(server: RestartableServer, tmp_path: Path) -> Iterator[Workers]:
    w = Workers(server.url, tmp_path)
    yield w
    w.close()


@pytest.fixture
def queue(server: RestartableServer, settings: Any) -> Queue:
    settings.EMQ = {**settings.EMQ, "URL": server.url}
    return FairLanesBackend("reconnect", {"QUEUES": ["default"]}).queue("default")


def stat(server: RestartableServer, queue: Queue, name: str) -> int | None:
    """A queue counter; ``None`` while the server is down."""
    client = server.client()
    try:
        return int(client.hget(queue.keys.stats, name) or 0)
    except (redis.ConnectionError, redis.TimeoutError):
        return None
    finally:
        client.close()


def parked(server: RestartableServer) -> bool:
    """Whether a client is blocked in BLPOP on the server (a parked worker)."""
    client = server.client()
    try:
        return any(c["cmd"] == "blpop" and "b" in c["flags"] for c in client.client_list())
    finally:
        client.close()


def enqueue(queue: Queue, seconds: float) -> list[str]:
    labels = [f"job{i:02d}" for i in range(JOBS)]
    queue.enqueue_many(
        {
            "lane": lane_id("USR", 1 + i % LANES),
            "task_path": chaos_tasks.nap.module_path,
            "args": [label, seconds],
            "job_id": label,
        }
        for i, label in enumerate(labels)
    )
    return labels


def assert_each_ran_once(queue: Queue, workers: Workers, labels: list[str]) -> None:
    runs = read_runs(workers.runs)
    assert {label: len(runs.get(label, [])) for label in labels} == dict.fromkeys(labels, 1)
    for label in labels:
        row = queue.job(label)
        assert row is not None
        assert (row["state"], row["attempts"]) == ("done", "1")
    totals = queue.totals()
    assert (totals.pending, totals.active, totals.scheduled, totals.dead) == (0, 0, 0, 0)
    check_invariants(queue)


def test_worker_rides_out_a_server_restart_mid_work(
    server: RestartableServer, workers: Workers, queue: Queue
) -> None:
    labels = enqueue(queue, 0.5)
    worker = workers.start("--concurrency", "2", "--lease", "10")
    wait_for(lambda: len(read_runs(workers.runs)) == 2, what="two jobs running")
    # Down for longer than a job takes: the two running jobs finish while the
    # server is away, so the worker must keep their outcomes until it is back.
    server.restart(down_for=2.5)
    wait_for(lambda: stat(server, queue, "completed") == JOBS, what="every job done")

    assert worker.alive()
    assert "could not reach Valkey" in worker.output()
    assert_each_ran_once(queue, workers, labels)


def test_parked_worker_reconnects_after_a_restart(
    server: RestartableServer, workers: Workers, queue: Queue
) -> None:
    worker = workers.start("--concurrency", "2", "--lease", "10")
    wait_for(lambda: "worker " in worker.output(), what="the worker up")
    server.restart(down_for=1.0)
    labels = enqueue(queue, 0.0)
    wait_for(lambda: stat(server, queue, "completed") == JOBS, what="every job done")
    assert worker.alive()
    assert_each_ran_once(queue, workers, labels)


def test_worker_started_while_the_server_is_down_waits_for_it(
    server: RestartableServer, workers: Workers, queue: Queue
) -> None:
    server.kill()
    worker = workers.start("--concurrency", "2", "--lease", "10")
    wait_for(lambda: "could not reach Valkey" in worker.output(), what="the worker retrying")
    assert worker.alive()
    server.start()
    labels = enqueue(queue, 0.0)
    wait_for(lambda: stat(server, queue, "completed") == JOBS, what="every job done")
    assert_each_ran_once(queue, workers, labels)


def test_parked_worker_does_not_hang_on_a_server_that_stopped_answering(
    server: RestartableServer, tmp_path: Path, queue: Queue
) -> None:
    """A frozen server (SIGSTOP) answers nothing and resets nothing, like a peer
    gone without a trace: a parked worker's read times out instead of blocking
    forever, and it carries on once the server answers again."""
    short = {"EMQ_TEST_SETTINGS": json.dumps({"ENQUEUE_TIMEOUT": 0.5})}
    workers = Workers(server.url, tmp_path, short)
    try:
        worker = workers.start("--concurrency", "2", "--lease", "10")
        wait_for(lambda: parked(server), what="the worker parked on its wake list")
        server.freeze()
        wait_for(
            lambda: "while parked: could not reach Valkey" in worker.output(),
            what="the park timed out",
        )
        assert worker.alive()
        server.thaw()
        labels = enqueue(queue, 0.0)
        wait_for(lambda: stat(server, queue, "completed") == JOBS, what="every job done")
        assert_each_ran_once(queue, workers, labels)
    finally:
        server.thaw()
        workers.close()


def test_a_burst_worker_that_loses_the_server_at_its_end_check_waits_for_it(
    server: RestartableServer, queue: Queue
) -> None:
    """Whether a burst run is drained is asked of the server (reap, promote, the
    ring): when it cannot answer, the run is not over, and nothing raises."""
    from django.tasks import task_backends

    from django_emq.worker import WorkerOptions

    backend = task_backends["default"]
    assert isinstance(backend, FairLanesBackend)

    async def check() -> tuple[bool, bool]:
        _, claimer, shard = worker_parts(backend, WorkerOptions(burst=True, beat=0.2))
        server.kill()
        await claimer._nothing_to_claim()
        down = claimer.drained
        server.start()
        await claimer._nothing_to_claim()
        await shard.client.aclose()
        return down, claimer.drained

    assert asyncio.run(check()) == (False, True)


@pytest.mark.django_db  # settling closes stale database connections, as around jobs
def test_the_flusher_sends_waiting_outcomes_with_one_try_and_keeps_them_while_down(
    server: RestartableServer, queue: Queue
) -> None:
    """Outcomes the flusher sends (no claim took them within 20 ms) never hold the
    worker up: with the server down it tries once and keeps them; once the
    server is back they are recorded."""
    from django.tasks import task_backends

    from django_emq.worker import WorkerOptions
    from django_emq.worker.jobs import Job
    from django_emq.worker.outcomes import FLUSH_AFTER, Success

    backend = task_backends["default"]
    assert isinstance(backend, FairLanesBackend)
    engine = backend.queue("default")
    enqueued = engine.enqueue(lane_id("USR", 1), chaos_tasks.tick.module_path, ["x"])

    async def check() -> tuple[bool, int, bool, int]:
        core, _, shard = worker_parts(backend, WorkerOptions(beat=0.5))
        claims = engine.claim(60_000, worker_id=core.plan.worker_id)
        assert claims is not None
        job = Job(shard, claims[0], time.monotonic() + 60)
        core.held[job.job_id] = job
        core.outcomes.add(Success(job, b'"x:1"', "x:1", time.monotonic() - FLUSH_AFTER))
        server.kill()
        assert not await core.outcomes.record(core.outcomes.take(), patient=False)
        kept = len(core.outcomes)
        settled_while_down = job.settled
        server.start()
        flusher = asyncio.create_task(core.outcomes.run(0.5))
        while not job.settled:
            await asyncio.sleep(0.01)
        flusher.cancel()
        await shard.client.aclose()
        return settled_while_down, kept, job.settled, core.counts["done"]

    assert asyncio.run(check()) == (False, 1, True, 1)
    row = engine.job(enqueued.job_id)
    assert row is not None
    assert row["state"] == "done"


def test_the_health_file_turns_stale_while_the_worker_cannot_reach_the_server(
    server: RestartableServer, workers: Workers, tmp_path: Path
) -> None:
    """Touched every beat while the worker works; not once during an outage
    (counted in the beats that warned of it), and again once it is over."""
    health = tmp_path / "alive"
    worker = workers.start("--concurrency", "1", "--lease", "3", "--health-file", str(health))
    wait_for(health.exists, what="the health file touched")
    server.kill()

    def warned() -> int:
        return worker.output().count("beat: ")

    wait_for(lambda: warned() >= 1, what="a beat that missed the server")
    touched = health.stat().st_mtime_ns
    seen = warned()
    wait_for(lambda: warned() >= seen + 3, what="three more beats during the outage")
    assert health.stat().st_mtime_ns == touched
    assert worker.alive()
    server.start()
    wait_for(lambda: health.stat().st_mtime_ns > touched, what="the health file touched again")


def test_outcomes_refused_while_the_server_takes_no_writes_are_kept_and_recorded_after(
    server: RestartableServer, workers: Workers, queue: Queue
) -> None:
    """Over ``maxmemory`` under ``noeviction`` the server refuses every write
    (OOM) while it stays reachable: the jobs that finish then keep their
    outcomes and record them once it takes writes again, well inside their
    30 s lease, so none runs a second time."""
    labels = enqueue(queue, 0.5)
    worker = workers.start("--concurrency", "2", "--lease", "30")
    wait_for(lambda: len(read_runs(workers.runs)) == 2, what="two jobs running")
    client = server.client()
    try:
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", 1)
        wait_for(
            lambda: "takes no writes for now" in worker.output(),
            what="an outcome refused while the server takes no writes",
        )
    finally:
        client.config_set("maxmemory", 0)
        client.close()
    wait_for(lambda: stat(server, queue, "completed") == JOBS, what="every job done")
    assert worker.alive()
    assert_each_ran_once(queue, workers, labels)


def test_a_stop_while_the_server_does_not_answer_is_bounded_by_the_grace_and_margin(
    server: RestartableServer, tmp_path: Path, queue: Queue
) -> None:
    """SIGTERM with the server frozen (SIGSTOP), each call waiting a 20 s timeout:
    the calls left after the grace (records, releases, the last history and
    heartbeat, the watchdog's releases) share the stop's deadline, so the worker
    ends within the grace and ``HARD_MARGIN`` (a call or two would exceed it);
    and nothing says the loop was blocked: it was not."""
    settings = {"ENQUEUE_TIMEOUT": 20, "PREFETCH": 16}
    workers = Workers(server.url, tmp_path, {"EMQ_TEST_SETTINGS": json.dumps(settings)})
    enqueue(queue, 0.5)
    worker = workers.start("--concurrency", "2", "--lease", "60", "--grace", "1")
    try:
        wait_for(lambda: len(read_runs(workers.runs)) >= 2, what="two jobs running")
        server.freeze()
        worker.signal(signal.SIGTERM)
        worker.process.wait(timeout=1 + HARD_MARGIN + 5)  # its bound, and a little slack
    finally:
        server.thaw()
        workers.close()
    log = worker.output()
    assert worker.process.returncode in (0, 1), log
    if worker.process.returncode == 1:
        assert "its wind-down still waiting on the server" in log
    assert "blocked" not in log
