"""A real ``run_emq_worker --backend tuned`` process runs with that backend's
``OPTIONS`` in place of ``EMQ``'s (the test settings' ``EMQ`` says
``RETRY_BACKOFF`` 0, a 30 s lease, a 30 s grace, ``PREFETCH`` 16), and its own
command-line options win over both. The worker's settings module is
``tests.tuned_settings``: the test settings plus the backend ``tuned``, whose
``OPTIONS`` come from ``$EMQ_TEST_OPTIONS``."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from typing import Any

import pytest
import redis
from django.tasks import task_backends

from django_emq import lane_id
from django_emq.backend import FairLanesBackend
from django_emq.connection import get_connection
from django_emq.engine.queue import Queue
from django_emq.engine.rows import Outcome, Row, attempt_history
from tests.helpers import wait_for
from tests.test_worker import processes, runs, worker_process

pytestmark = pytest.mark.django_db
__all__ = ["processes"]  # the fixture, shared with test_worker

A = lane_id("USR", 1)
OPEN = "test:open"


def tuned(emq: redis.Redis, settings: Any, options: dict[str, Any]) -> Queue:
    """This process's ``TASKS`` as the worker's (``tests.tuned_settings``) will
    be, and the queue ``tuned`` of backend ``tuned``."""
    settings.TASKS = {
        **settings.TASKS,
        "tuned": {
            "BACKEND": "django_emq.backend.FairLanesBackend",
            "QUEUES": ["tuned"],
            "OPTIONS": options,
        },
    }
    backend = task_backends["tuned"]
    assert isinstance(backend, FairLanesBackend)
    return backend.queue("tuned")


def worker(options: dict[str, Any], *args: str) -> subprocess.Popen[bytes]:
    """``run_emq_worker --backend tuned`` in a process of its own, the backend's
    ``OPTIONS`` being ``options``."""
    return worker_process(
        "--backend",
        "tuned",
        *args,
        settings_module="tests.tuned_settings",
        environ={"EMQ_TEST_OPTIONS": json.dumps(options)},
    )


def server_ms(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


@pytest.mark.parametrize(
    ("args", "lease_ms"),
    [((), 7000), (("--lease", "4"), 4000)],
    ids=["the backend's LEASE", "--lease over it"],
)
def test_a_claimed_job_is_leased_for_the_backends_lease(
    emq: redis.Redis,
    settings: Any,
    processes: list[subprocess.Popen[bytes]],
    args: tuple[str, ...],
    lease_ms: int,
) -> None:
    """Its deadline in the active set is its claim time plus the lease, or
    later by the extensions since, and never more than a lease from now."""
    options = {"LEASE": 7, "BEAT": 1}
    q = tuned(emq, settings, options)
    job = q.enqueue(A, "tests.tasks.gate", ["held", OPEN])
    processes.append(worker(options, *args))
    wait_for(lambda: "start:held" in runs(emq), what="the job started")
    row = q.job(job.job_id)
    assert row is not None
    deadline = emq.zscore(q.keys.active, job.job_id)
    assert deadline is not None
    claimed = int(row[Row.CLAIMED])
    assert claimed + lease_ms <= deadline <= server_ms(emq) + lease_ms
    emq.set(OPEN, 1)
    wait_for(lambda: (q.job(job.job_id) or {}).get(Row.STATE) == "done", what="the job done")


def test_a_worker_claims_no_further_ahead_than_the_backends_prefetch(
    emq: redis.Redis, settings: Any, processes: list[subprocess.Popen[bytes]]
) -> None:
    """Short jobs teach the worker to claim ahead; the gated jobs behind them
    never finish, so every one it claimed stays held: at most ``--concurrency``
    + ``PREFETCH`` - 1 = 3 of them, where ``EMQ``'s 16 would let it take 11."""
    options = {"PREFETCH": 3}
    q = tuned(emq, settings, options)
    q.enqueue_many([{"lane": A, "task_path": "tests.tasks.add", "args": [n, 1]} for n in range(60)])
    gated = q.enqueue_many(
        [{"lane": A, "task_path": "tests.tasks.gate", "args": [f"g{n}", OPEN]} for n in range(15)]
    )
    processes.append(worker(options))

    def held() -> int:
        rows = [q.job(job.job_id) or {} for job in gated]
        return sum(row.get(Row.STATE) == "active" for row in rows)

    wait_for(lambda: held() >= 2, what="the worker claimed gated jobs ahead")
    time.sleep(1.0)  # five beats: time for any claim it would still make
    assert 2 <= held() <= 3
    emq.set(OPEN, 1)
    wait_for(lambda: held() == 0 and q.totals().pending == 0, what="every job done")


def test_a_failed_job_waits_the_backends_retry_backoff(
    emq: redis.Redis, settings: Any, processes: list[subprocess.Popen[bytes]]
) -> None:
    """With ``EMQ``'s back-off of 0 it would run again at once; the backend's
    600 s schedules its retry 0-600 s after the failure (full jitter)."""
    options = {"RETRY_BACKOFF": 600, "RETRY_BACKOFF_MAX": 600}
    q = tuned(emq, settings, options)
    job = q.enqueue(A, "tests.tasks.boom", ["once"])
    p = worker(options, "--burst")
    processes.append(p)
    assert p.wait(timeout=60) == 0
    assert runs(emq) == ["once"]
    row = q.job(job.job_id)
    assert row is not None
    assert row[Row.STATE] == "scheduled"
    (failed,) = attempt_history(row).kept
    assert failed.outcome == Outcome.FAILED
    assert failed.end_ms is not None
    assert 0 < int(row[Row.DUE]) - failed.end_ms <= 600_000
    assert emq.zscore(q.keys.schedule, job.job_id) == int(row[Row.DUE])


@pytest.mark.parametrize(
    ("args", "outcome"),
    [((), Outcome.RELEASED), (("--grace", "30"), Outcome.DONE)],
    ids=["the backend's SHUTDOWN_GRACE", "--grace over it"],
)
def test_sigterm_gives_running_jobs_the_backends_shutdown_grace(
    emq: redis.Redis,
    settings: Any,
    processes: list[subprocess.Popen[bytes]],
    args: tuple[str, ...],
    outcome: str,
) -> None:
    """``SHUTDOWN_GRACE`` 0 releases the running job at once, back to the head
    of its lane, where ``EMQ``'s 30 s would let it finish; ``--grace`` wins."""
    options = {"SHUTDOWN_GRACE": 0}
    q = tuned(emq, settings, options)
    job = q.enqueue(A, "tests.tasks.slow", ["s", 2.0])
    p = worker(options, *args)
    processes.append(p)
    wait_for(lambda: "start:s" in runs(emq), what="the job started")
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=30)
    row = q.job(job.job_id)
    assert row is not None
    (attempt,) = attempt_history(row).kept
    assert attempt.outcome == outcome
    assert row[Row.STATE] == ("done" if outcome == Outcome.DONE else "pending")


def test_a_worker_of_a_backend_with_bad_options_refuses_to_start(emq: redis.Redis) -> None:
    """The error names the alias and the key; nothing is claimed."""
    q = Queue("tuned", connection=get_connection())  # the backend cannot open it
    job = q.enqueue(A, "tests.tasks.record", ["never"])
    p = worker({"LEASE": 0}, "--burst")
    out, _ = p.communicate(timeout=60)
    assert p.returncode != 0
    assert "TASKS['tuned']['OPTIONS']['LEASE'] must be more than zero" in out.decode()
    assert (q.job(job.job_id) or {}).get(Row.STATE) == "pending"
    assert runs(emq) == []


def test_a_duration_past_its_maximum_is_refused_by_name_not_by_overflow(
    emq: redis.Redis, settings: Any
) -> None:
    """``RESULT_TTL: 1e30`` made every enqueue raise ``OverflowError`` and the
    worker die with a traceback: it is now the settings' own error, naming the
    key and its maximum, at the enqueue (nothing written) and at the worker."""
    from django_emq.exceptions import ConfigurationError

    message = "TASKS['tuned']['OPTIONS']['RESULT_TTL'] must be at most 31622400 seconds"
    settings.TASKS = {**settings.TASKS, "tuned": {
        "BACKEND": "django_emq.backend.FairLanesBackend", "QUEUES": ["tuned"],
        "OPTIONS": {"RESULT_TTL": 1e30}}}  # fmt: skip
    backend = task_backends["tuned"]
    assert isinstance(backend, FairLanesBackend)
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        backend.queue("tuned")
    p = worker({"RESULT_TTL": 1e30}, "--burst", "--skip-checks")
    out = p.communicate(timeout=60)[0].decode()
    assert p.returncode != 0
    assert message in out
    assert "Traceback" not in out
    assert "OverflowError" not in out


def test_bad_options_of_one_backend_stop_every_worker_until_fixed_or_skipped(
    emq: redis.Redis,
) -> None:
    """As docs/settings.md says: ``emq.E008`` is a system-check error, so like
    any Django check error it stops every command that runs the checks, the
    workers of the other backends too; with ``--skip-checks`` those run, with
    their own settings, while the broken backend's still refuses."""
    q = Queue("default", connection=get_connection())
    job = q.enqueue(A, "tests.tasks.record", ["served"])
    # A later --backend wins over the "--backend tuned" worker() passes first.
    checked = worker({"LEASE": 0}, "--backend", "default", "--burst")
    out = checked.communicate(timeout=60)[0].decode()
    assert checked.returncode != 0
    assert "emq.E008" in out
    assert "TASKS['tuned']['OPTIONS']['LEASE']" in out
    assert (q.job(job.job_id) or {}).get(Row.STATE) == "pending"
    skipped = worker({"LEASE": 0}, "--backend", "default", "--burst", "--skip-checks")
    out = skipped.communicate(timeout=60)[0].decode()
    assert skipped.returncode == 0, out
    assert (q.job(job.job_id) or {}).get(Row.STATE) == "done"
    broken = worker({"LEASE": 0}, "--burst", "--skip-checks")
    out = broken.communicate(timeout=60)[0].decode()
    assert broken.returncode != 0
    assert "TASKS['tuned']['OPTIONS']['LEASE'] must be more than zero" in out
