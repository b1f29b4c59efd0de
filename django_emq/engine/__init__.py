"""The engine: fair lanes on Valkey, with no Django anywhere.

It imports ``redis`` and never ``django`` (``tests/test_layers.py`` proves it):
ids and key names (``ids``, ``keys``, ``placement``), the job row and heartbeat
formats (``rows``, ``payload``), the Lua scripts and their loader (``lua/``,
``scripts``, ``calls``), the queues (``queue``, ``shards``), idle workers'
parking (``parking``) and bounded operator reads (``browse``). The Django
layer above it (``django_emq.conf``, ``connection``, ``backend``, ``lanes``)
builds clients and settings and hands them down.

The names a user of the engine needs (the queues, lane and job ids, the
values the queues take and answer, every exception and the keyspace doctor)
are imported from here, the one path ``docs/engine.md`` shows
(``from django_emq.engine import Queue, lane_id``); the modules behind it may
move. No engine module imports from this package itself, only from its
siblings, so importing any of them first makes no circle
(``tests/test_imports.py``).
"""

from __future__ import annotations

from .bulk import (
    Bulk,
    Retried,
    cancel_jobs,
    cancel_lane,
    cancel_task,
    retry_dead_of_task,
    run_again,
)
from .doctor import Doctor, Finding, Report
from .exceptions import (
    CorruptJob,
    CorruptKeyspace,
    EMQError,
    EnqueueError,
    InvalidArguments,
    InvalidJobState,
    JobCancelled,
    JobError,
    JobNotFound,
    LaneFull,
    LeaseExpired,
    ScriptError,
    StaleToken,
)
from .ids import (
    is_lane,
    lane_id,
    mint_job_id,
    validate_job_id,
    validate_lane,
    validate_queue_name,
    validate_tenant,
)
from .placement import shard_tags
from .policies.tenants import TenantInfo
from .queue import Queue
from .records import (
    MAX_DELAY_MS,
    MAX_LEASE_MS,
    Claim,
    ClaimRequest,
    Enqueued,
    JobSpec,
    LaneInfo,
    Totals,
)
from .rows import Attempt, AttemptHistory, Outcome, attempt_history
from .shards import AnyQueue, ShardedQueue, open_queue
from .worker_control import ask_to_stop

__all__ = [
    "MAX_DELAY_MS",
    "MAX_LEASE_MS",
    "AnyQueue",
    "Attempt",
    "AttemptHistory",
    "Bulk",
    "Claim",
    "ClaimRequest",
    "CorruptJob",
    "CorruptKeyspace",
    "Doctor",
    "EMQError",
    "EnqueueError",
    "Enqueued",
    "Finding",
    "InvalidArguments",
    "InvalidJobState",
    "JobCancelled",
    "JobError",
    "JobNotFound",
    "JobSpec",
    "LaneFull",
    "LaneInfo",
    "LeaseExpired",
    "Outcome",
    "Queue",
    "Report",
    "Retried",
    "ScriptError",
    "ShardedQueue",
    "StaleToken",
    "TenantInfo",
    "Totals",
    "ask_to_stop",
    "attempt_history",
    "cancel_jobs",
    "cancel_lane",
    "cancel_task",
    "is_lane",
    "lane_id",
    "mint_job_id",
    "open_queue",
    "retry_dead_of_task",
    "run_again",
    "shard_tags",
    "validate_job_id",
    "validate_lane",
    "validate_queue_name",
    "validate_tenant",
]
