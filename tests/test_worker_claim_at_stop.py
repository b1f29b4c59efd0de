"""SIGTERM while a claim is in flight, with a real worker process: the jobs
that claim took are not abandoned. The server's handling of the claim is held
(``CLIENT PAUSE ... WRITE``) while the worker is told to stop; once it answers,
the success riding along is recorded and the job claimed is released at once,
uncharged, never left ``active`` until its lease runs out."""

from __future__ import annotations

import signal
from pathlib import Path

import redis

from django_emq import enqueue_for, lane_id
from django_emq.engine.rows import Outcome
from tests import chaos_tasks
from tests.chaos_tasks import read_runs
from tests.faults import Workers
from tests.helpers import wait_for
from tests.invariants import check_invariants
from tests.test_worker import backend
from tests.test_worker_grace import outcomes


def held_calls(emq: redis.Redis) -> set[str]:
    """The clients whose function call the paused server holds."""
    return {c["id"] for c in emq.client_list() if c.get("cmd") == "fcall" and "b" in c["flags"]}


def test_a_claim_in_flight_at_sigterm_hands_its_jobs_back(
    emq: redis.Redis, workers: Workers, tmp_path: Path
) -> None:
    q = backend().queue("default")
    go = tmp_path / "go"
    first = enqueue_for(lane_id("USR", 1), chaos_tasks.awaits_file, "first", str(go))
    # a long beat: no heartbeat of the worker's is held by the pause with the claim
    worker = workers.start(
        "--queue", "default", "--concurrency", "1", "--prefetch", "1",
        "--lease", "90", "--beat", "30",
    )  # fmt: skip
    wait_for(lambda: "first" in read_runs(workers.runs), what="the first job running")
    second = enqueue_for(lane_id("USR", 1), chaos_tasks.tick, "second")
    # the worker's history of that claim is written: it makes no call until the next claim
    wait_for(lambda: bool(emq.keys("emq:{default}:m:*")), what="the first claim's history")
    emq.client_pause(60_000, all=False)  # writes only
    try:
        before = held_calls(emq)
        go.touch()  # the first ends; the next claim carries its success
        wait_for(lambda: "first-end" in read_runs(workers.runs), what="the first job ended")
        wait_for(lambda: bool(held_calls(emq) - before), what="the claim held by the server")
        worker.signal(signal.SIGTERM)
        wait_for(lambda: "no new claims" in worker.output(), what="the worker told to stop")
    finally:
        emq.client_unpause()
    worker.process.wait(timeout=60)  # a safety net: the grace and its margin bound it
    assert worker.process.returncode == 0
    assert outcomes(q, first.id) == ("done", [Outcome.DONE])
    assert outcomes(q, second.id) == ("pending", [Outcome.RELEASED])
    assert (q.job(second.id) or {}).get("expiries", "0") == "0"
    assert "second" not in read_runs(workers.runs)
    log = worker.output()
    assert f"job={second.id}" in log
    assert "within 5s past the grace" not in log  # its wind-down kept to its bound
    check_invariants(q)
