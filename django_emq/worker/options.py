"""What a worker is told (:class:`WorkerOptions`, shared with ``run_emq_worker``)
and what it makes of it with the settings of its backend (:class:`Plan`): ``EMQ``
with the backend's ``OPTIONS`` in place, and the options set here over both."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from ..conf import emq_settings, with_flags
from ..conf_table import DEFAULT_THREADS
from ..engine.records import WORKER_ID_RE


@dataclass
class WorkerOptions:
    """Everything ``run_emq_worker`` can set. ``None`` takes the backend's
    setting; the fields that stand for a setting are the ``flag`` of its row in
    :mod:`django_emq.conf_table`."""

    queues: list[str] = field(default_factory=list)
    #: Jobs in flight at once: coroutines on the loop, sync tasks on the threads.
    concurrency: int = 1
    #: Threads for sync tasks (default ``THREADS``, else ``min(concurrency, 16)``).
    threads: int | None = None
    lease: float | None = None
    burst: bool = False
    max_jobs: int | None = None
    worker_id: str | None = None
    health_file: Path | None = None
    beat: float | None = None
    grace: float | None = None
    prefetch: int | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """A worker's options with every default filled in and checked."""

    concurrency: int
    threads: int
    lease_ms: int
    beat_s: float
    grace_s: float
    worker_id: str
    prefetch: int
    burst: bool
    max_jobs: int | None
    health_file: Path | None
    enqueue_timeout: float
    retry_backoff: float
    retry_backoff_max: float
    max_payload: int

    @property
    def lease_s(self) -> float:
        return self.lease_ms / 1000


def plan(options: WorkerOptions, alias: str) -> Plan:
    """Resolve ``options`` against the settings backend ``alias`` runs with
    (``EMQ``, its ``OPTIONS`` in place); a value ``options`` sets wins.
    ``ValueError`` for a bad option, ``ConfigurationError`` for bad settings."""
    s = with_flags(emq_settings(alias), options)
    concurrency = _at_least_one("concurrency", options.concurrency)
    threads = s.threads or min(concurrency, DEFAULT_THREADS)
    # A job claimed ahead waits in the worker, and a time-fair queue would charge
    # its lane for the wait: with a time-fair queue configured, none is, unless
    # --prefetch says so (docs/time-fair.md).
    time_fair = "time" in s.fairness.values()
    prefetch = 1 if time_fair and options.prefetch is None else s.prefetch
    lease_ms = int(s.lease * 1000)
    # The beat of the settings is shorter than their lease; a shorter --lease
    # shortens it with it, unless --beat says otherwise.
    beat_s = s.beat if options.beat is not None else min(s.beat, lease_ms / 3000)
    if beat_s >= lease_ms / 1000:  # --beat given: the settings' rule, checked again
        raise ValueError(
            f"--beat {beat_s:g} must be shorter than the lease ({lease_ms / 1000:g} s): "
            "the worker extends leases every beat, so a longer beat lets running jobs' "
            "leases expire"
        )
    if options.health_file is not None and not options.health_file.parent.is_dir():
        raise ValueError(
            f"--health-file {options.health_file}: the folder "
            f"{options.health_file.parent} does not exist; create it first"
        )
    worker_id = options.worker_id or f"{socket.gethostname()}:{os.getpid()}"
    if not WORKER_ID_RE.fullmatch(worker_id):
        raise ValueError(f"{worker_id!r} is not a worker id: use 1-128 of A-Z a-z 0-9 _ . : @ -")
    return Plan(
        concurrency=concurrency,
        threads=min(_at_least_one("threads", threads), concurrency),
        lease_ms=lease_ms,
        beat_s=beat_s,
        grace_s=s.shutdown_grace,
        worker_id=worker_id,
        prefetch=prefetch,
        burst=options.burst,
        max_jobs=options.max_jobs,
        health_file=options.health_file,
        enqueue_timeout=s.enqueue_timeout,
        retry_backoff=s.retry_backoff,
        retry_backoff_max=s.retry_backoff_max,
        max_payload=s.max_payload,
    )


def _at_least_one(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, not {value!r}")
    return value
