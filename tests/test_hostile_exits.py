"""Jobs that end or break the worker running them, met by real worker processes
restarted as a supervisor would: a task module that calls ``os._exit()`` at
import, and a job that makes one of its worker's duties fail. Each kill or
breakage counts against ``MAX_EXPIRIES``, so the job ends dead instead of
coming back for ever; the jobs claimed with it are charged at most once (by
its first kill, before anyone knew it)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from django_emq import enqueue_for, lane_id
from django_emq.engine.queue import Queue
from django_emq.exceptions import LeaseExpired
from tests import chaos_tasks, hostile_sigterm
from tests.chaos_tasks import read_runs
from tests.faults import WorkerProcess, Workers
from tests.helpers import wait_for
from tests.invariants import check_invariants
from tests.test_worker import backend

A = lane_id("USR", 1)


def state(q: Queue, job_id: str) -> str:
    return (q.job(job_id) or {}).get("state", "")


def supervise(workers: Workers, over: Callable[[], bool], *args: str) -> list[WorkerProcess]:
    """Start a worker with ``args`` each time the last one ended, until ``over``;
    the workers started."""
    started = []
    give_up = time.monotonic() + 120  # a safety limit only
    while not over():
        assert time.monotonic() < give_up, "the jobs never ended"
        worker = workers.start(*args)
        started.append(worker)
        while worker.alive() and not over():
            time.sleep(0.05)
    return started


def broken(started: list[WorkerProcess]) -> list[WorkerProcess]:
    """The workers ``started`` that a job broke, once they ended (a safety limit
    given): a worker started after the last one (the job's last lease may run
    out before the worker ending it reaps it) lives on, serving."""
    crashed = [w for w in started if "a job broke the worker running it" in w.output()]
    wait_for(lambda: not any(w.alive() for w in crashed), timeout=60, what="the workers ended")
    return crashed


def test_a_task_module_that_calls_os_exit_at_import_ends_dead(
    emq: redis.Redis, settings: Any, tmp_path: Path
) -> None:
    """Its first import kills a worker holding short jobs claimed ahead; from then
    on its row counts an expiry, and a worker imports it only once every success
    it holds is recorded: no other job is charged more than that first kill."""
    workers = Workers(settings.EMQ["URL"], tmp_path, {"EMQ_TEST_SETTINGS": '{"PREFETCH": 16}'})
    q = backend().queue("default")
    lanes = [lane_id("USR", n) for n in range(2, 8)]
    innocents = [
        enqueue_for(lane, chaos_tasks.tick, f"{lane}-{i}") for i in range(10) for lane in lanes
    ]
    poison = q.enqueue(A, "tests.hostile_os_exit.job").job_id
    innocents += [enqueue_for(A, chaos_tasks.tick, f"a-after-{i}") for i in range(5)]
    try:
        started = supervise(
            workers,
            lambda: state(q, poison) == "dead" and all(state(q, j.id) == "done" for j in innocents),
            "--concurrency", "1", "--lease", "1", "--burst",
        )  # fmt: skip
    finally:
        workers.close()
    assert len([w for w in started if w.process.returncode == 3]) == 3  # MAX_EXPIRIES
    row = q.job(poison)
    assert row is not None
    assert (row["expiries"], row.get("fails", "0")) == ("3", "0")
    error = json.loads(json.loads(row["errors"])[-1])
    assert error["exception_class_path"] == f"{LeaseExpired.__module__}.LeaseExpired"
    charged = {job.id: int((q.job(job.id) or {}).get("expiries", 0)) for job in innocents}
    assert max(charged.values()) <= 1, charged
    runs = read_runs(workers.runs)
    assert sorted(runs) == sorted(j.args[0] for j in innocents)
    check_invariants(q)


def test_a_job_that_breaks_its_worker_ends_dead_after_max_expiries(
    emq: redis.Redis, settings: Any, tmp_path: Path
) -> None:
    """The job makes its worker's beat fail (the worker stops, its error
    raised) and never returns. The stopping worker does not release it, as it
    would at a SIGTERM: it ends the lease at once, counted as an expiry, so
    after ``MAX_EXPIRIES`` (2 here) such workers the job is dead. The job
    behind it in its lane then runs."""
    workers = Workers(
        settings.EMQ["URL"], tmp_path, {"EMQ_TEST_SETTINGS": json.dumps({"MAX_EXPIRIES": 2})}
    )
    q = backend().queue("default")
    breaker = enqueue_for(A, chaos_tasks.breaks_its_worker, "breaker")
    behind = enqueue_for(A, chaos_tasks.tick, "behind")
    try:
        started = supervise(
            workers, lambda: state(q, breaker.id) == "dead", "--lease", "3", "--grace", "0"
        )
        crashed = broken(started)
        assert len(crashed) == 2
        assert all(w.process.returncode != 0 for w in crashed)
        workers.start("--concurrency", "1")
        wait_for(lambda: state(q, behind.id) == "done", what="the job behind it done")
    finally:
        workers.close()
    assert [run.attempt for run in read_runs(workers.runs)["breaker"]] == [1, 2]
    row = q.job(breaker.id)
    assert row is not None
    assert (row["expiries"], row.get("fails", "0")) == ("2", "0")
    logs = "".join(w.output() for w in workers.started)
    assert logs.count("a job broke the worker running it") >= 2
    assert f"job={breaker.id}" in logs
    assert "outcome=expired" in logs
    check_invariants(q)


def test_a_job_that_sigterms_its_worker_and_returns_is_recorded_done(
    emq: redis.Redis, settings: Any, tmp_path: Path
) -> None:
    """The job's body returns within the grace its own SIGTERM started: it is
    recorded done, once, and the worker ends as on any SIGTERM."""
    workers = Workers(settings.EMQ["URL"], tmp_path)
    q = backend().queue("default")
    job = enqueue_for(A, hostile_sigterm.terminates_its_worker, "returns")
    try:
        worker = workers.start("--lease", "2", "--grace", "5")
        assert worker.process.wait(60) == 0
    finally:
        workers.close()
    assert state(q, job.id) == "done"
    assert [run.attempt for run in read_runs(workers.runs)["returns"]] == [1]
    assert "sent by this worker's own code" in worker.output()
    check_invariants(q)


def test_a_job_that_sigterms_its_worker_ends_dead_after_max_expiries(
    emq: redis.Redis, settings: Any, tmp_path: Path
) -> None:
    """The job SIGTERMs its worker and outlives the grace: each such stop counts
    against ``MAX_EXPIRIES`` (2 here) instead of releasing it uncounted, so it
    ends dead instead of stopping every worker it meets for ever. The jobs of
    other lanes are never charged, a long one running beside it past the grace
    included (only the job that sent the signal is)."""
    workers = Workers(
        settings.EMQ["URL"], tmp_path, {"EMQ_TEST_SETTINGS": json.dumps({"MAX_EXPIRIES": 2})}
    )
    q = backend().queue("default")
    stopper = enqueue_for(A, hostile_sigterm.terminates_its_worker_and_stays, "stopper")
    others = [enqueue_for(lane_id("USR", 2), chaos_tasks.tick, f"other-{i}") for i in range(6)]
    # a long job of another lane, running beside the stopper past the grace: released
    others.append(enqueue_for(lane_id("USR", 3), chaos_tasks.nap, "long", 2.5))

    def over() -> bool:
        return state(q, stopper.id) == "dead" and all(state(q, j.id) == "done" for j in others)

    try:
        started = supervise(
            workers,
            over,
            "--concurrency", "2", "--lease", "2", "--grace", "1", "--burst",
        )  # fmt: skip
    finally:
        workers.close()
    assert [run.attempt for run in read_runs(workers.runs)["stopper"]] == [1, 2]
    row = q.job(stopper.id)
    assert row is not None
    assert (row["expiries"], row.get("fails", "0")) == ("2", "0")
    assert {(q.job(j.id) or {}).get("expiries", "0") for j in others} == {"0"}
    logs = "".join(w.output() for w in started)
    assert logs.count("sent by this worker's own code") == 2
    assert "still running after the grace of a stop its worker's own code signalled" in logs
    check_invariants(q)
