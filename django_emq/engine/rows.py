"""The one owner of two formats the engine stores: the job row's field names
(and how its packed fields read: ``workers``, ``tries``) and the worker
heartbeat record.

A job row (``emq:{q}:job:<id>``, a hash) is written by the Lua scripts and
read by Python; the names below are the only place Python spells them. The row
calls a job's lane ``group`` (the seed's name, kept in the stored format); the
Python says "lane" everywhere else.

A heartbeat is one field per worker of ``emq:{q}:workers``: a JSON record the
worker's beat writes and the admin reads back (:func:`heartbeat` and
:func:`parse_heartbeat`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final


class Row:
    """Field names of a job row."""

    STATE: Final = "state"
    LANE: Final = "group"
    SEQ: Final = "seq"
    TASK: Final = "task"
    ARGS: Final = "args"
    KWARGS: Final = "kwargs"
    ATTEMPTS: Final = "attempts"
    FAILS: Final = "fails"
    EXPIRIES: Final = "expiries"
    MAX_ATTEMPTS: Final = "max"
    ENQUEUED: Final = "enq"
    #: When a scheduled job is due (ms); a job deferred before its first start
    #: keeps it once promoted: when it became due, where its wait begins.
    DUE: Final = "due"
    CLAIMED: Final = "claimed"
    STARTED: Final = "started"
    WORKER: Final = "worker"
    #: The latest claimers' ids, comma-separated (at most ``Queue.history``;
    #: ``attempts`` counts every claim).
    WORKERS: Final = "workers"
    #: The latest attempts' start, end and outcome (at most ``Queue.history``,
    #: like ``workers``; see :func:`attempt_history` and ``lua/includes/tries.lua``).
    TRIES: Final = "tries"
    FINISHED: Final = "finished"
    RESULT: Final = "result"
    ERROR: Final = "error"
    #: The latest failures' texts (a JSON array of at most ``Queue.history``).
    ERRORS: Final = "errors"
    CANCEL: Final = "cancel"
    PROGRESS: Final = "progress"
    #: How many failures there were in all (``errors`` keeps the latest).
    ERRORS_TOTAL: Final = "errors_total"
    #: Opaque JSON the enqueuing layer keeps (django-emq's backend: its alias, ``run_after``).
    META: Final = "meta"


#: Stands for a claimer whose id a row no longer keeps: ``workers`` holds the
#: latest ``Queue.history`` ids, ``attempts`` counts every claim.
FORGOTTEN_WORKER: Final = "?"


def worker_ids(workers: str, attempts: int) -> list[str]:
    """One id per claim of a job, oldest first, from its row's ``workers`` and
    ``attempts``: the claims whose ids the row no longer keeps are
    :data:`FORGOTTEN_WORKER`, so ``len()`` is the number of claims (Django's
    ``TaskResult.attempts``)."""
    if attempts == 1 and workers and "," not in workers:  # a first attempt: most claims
        return [workers]
    kept = [w for w in workers.split(",") if w]
    return [FORGOTTEN_WORKER] * max(0, attempts - len(kept)) + kept


class Outcome:
    """How an attempt ended, as :func:`attempt_history` reads it."""

    RUNNING: Final = "running"
    DONE: Final = "done"
    FAILED: Final = "failed"
    EXPIRED: Final = "expired"
    RELEASED: Final = "released"
    #: Over, but nothing recorded its end (the doctor put the job back, a row
    #: edited by hand): only its start is known.
    UNRECORDED: Final = "unrecorded"
    #: No times kept for it (a claim from before ``tries`` was kept, an entry
    #: edited into something unreadable): only its worker is known.
    UNKNOWN: Final = "unknown"


_OUTCOMES: Final = {"d": Outcome.DONE, "f": Outcome.FAILED, "x": Outcome.EXPIRED,
                    "r": Outcome.RELEASED}  # fmt: skip
_TRY: Final = re.compile(r"(\d{1,15})(?:\+(\d{1,15})([dfxr])(\d{0,15}))?")


@dataclass(frozen=True, slots=True)
class Attempt:
    """One claim of a job: its number (1 = the first), the worker that took it
    (:data:`FORGOTTEN_WORKER` when the row no longer keeps it), when it started
    and ended (server ms, ``None`` when not known), how it ended
    (:class:`Outcome`) and, for a failure or a lease expiry that made the job
    dead, the failure's number among the job's failures (``errors_total``
    then: the failures the row keeps are numbered the same way)."""

    number: int
    worker: str
    start_ms: int | None
    end_ms: int | None
    outcome: str
    failure: int | None = None


@dataclass(frozen=True, slots=True)
class AttemptHistory:
    """The attempts a row keeps, oldest first, and how many earlier ones it no
    longer keeps (``EMQ["HISTORY"]`` bounds the row)."""

    kept: tuple[Attempt, ...]
    forgotten: int


def _try(number: int, worker: str, entry: str | None, running: bool) -> Attempt:
    """One ``tries`` entry read (``None``: no entry for this claim)."""
    found = _TRY.fullmatch(entry) if entry is not None else None
    if found is None:
        return Attempt(number, worker, None, None, Outcome.UNKNOWN)
    start, took, code, failure = found.groups()
    if took is None:
        return Attempt(number, worker, int(start), None,
                       Outcome.RUNNING if running else Outcome.UNRECORDED)  # fmt: skip
    return Attempt(number, worker, int(start), int(start) + int(took), _OUTCOMES[code],
                   int(failure) if failure else None)  # fmt: skip


def filled(row: Mapping[str, str]) -> dict[str, str]:
    """The row with what a first attempt leaves unwritten filled in.

    A job's first claim writes only ``attempts``, ``state``, ``claimed`` and
    ``worker``, and its success only its outcome and ``finished`` (the hot
    path's cost, ``lua/includes/tries.lua``): its ``started`` is its
    ``claimed``, its ``workers`` its ``worker``, and its ``tries`` entry starts
    at ``claimed`` (and ends at ``finished`` when the job is done). Any other
    end of the attempt writes its ``tries`` out, and a later claim all three.
    Every reader of a row sees the same fields either way.
    """
    out = dict(row)
    claimed = out.get(Row.CLAIMED)
    # A row from before `tries` were kept has `workers` (and no `tries`): as it is.
    if out.get(Row.ATTEMPTS) != "1" or claimed is None or Row.WORKERS in out:
        return out
    out.setdefault(Row.STARTED, claimed)
    if Row.WORKER in out:
        out[Row.WORKERS] = out[Row.WORKER]
    if Row.TRIES not in out:
        entry = claimed
        finished = out.get(Row.FINISHED, "")
        if out.get(Row.STATE) == "done" and finished.isdigit() and claimed.isdigit():
            entry += f"+{max(0, int(finished) - int(claimed))}d"
        out[Row.TRIES] = entry
    return out


def attempt_history(row: Mapping[str, str], most: int = 1_000) -> AttemptHistory:
    """Every attempt a job row keeps (at most ``most`` of the latest), from its
    ``attempts``, ``workers``, ``tries`` and ``state``.

    ``workers`` and ``tries`` each keep one entry per claim, the latest last,
    so they line up from their ends; a claim one of them no longer keeps (a row
    from before ``tries`` existed) has that part unknown. Anything unreadable
    (a row edited by hand) reads as unknown rather than failing. A first
    attempt's unwritten fields are filled in first (:func:`filled`).
    """
    row = filled(row)
    workers = [w for w in row.get(Row.WORKERS, "").split(",") if w]
    tries = [t for t in row.get(Row.TRIES, "").split(",") if t]
    try:
        claims = max(0, int(row.get(Row.ATTEMPTS) or 0))
    except ValueError:
        claims = 0
    claims = max(claims, len(workers), len(tries))
    kept = min(claims, max(len(workers), len(tries)), most)
    running = row.get(Row.STATE) == "active"
    attempts = []
    for back in range(kept, 0, -1):  # back = 1: the latest claim
        worker = workers[-back] if back <= len(workers) else FORGOTTEN_WORKER
        entry = tries[-back] if back <= len(tries) else None
        attempts.append(_try(claims - back + 1, worker, entry, running and back == 1))
    return AttemptHistory(tuple(attempts), claims - kept)


#: Fields of a job row a listing shows.
LISTED_FIELDS: Final = (
    Row.STATE,
    Row.LANE,
    Row.TASK,
    Row.ARGS,
    Row.KWARGS,
    Row.ATTEMPTS,
    Row.FAILS,
    Row.ENQUEUED,
    Row.CLAIMED,
    Row.WORKER,
    Row.FINISHED,
    Row.ERROR,
)


@dataclass(frozen=True, slots=True)
class WorkerBeat:
    """A worker's last heartbeat (``beat_ms`` from the worker's clock);
    ``None`` fields when the record could not be read."""

    worker_id: str
    host: str | None
    pid: int | None
    done: int | None
    running: int | None
    beat_ms: int | None
    #: Optional in a record (a worker that does not write them shows "?"):
    #: the queues it serves, its concurrency, the jobs that failed on it, and
    #: when it started (ms, the worker's clock).
    queues: tuple[str, ...] = ()
    concurrency: int | None = None
    failed: int | None = None
    started_ms: int | None = None
    #: The worker's beat interval in ms (``None``: a record from before it was kept).
    every_ms: int | None = None
    #: When the worker stopped (server ms): its last record, kept
    #: :data:`STOPPED_KEPT_MS` so the workers page lists it as stopped.
    stopped_ms: int | None = None


def heartbeat(
    *,
    host: str,
    pid: int,
    done: int,
    running: int,
    beat_ms: int,
    every_ms: int | None = None,
    queues: tuple[str, ...] = (),
    concurrency: int | None = None,
    failed: int | None = None,
    started_ms: int | None = None,
    stopped_ms: int | None = None,
) -> str:
    """The record a worker's beat stores under its id: ``beat_ms`` when it
    beat (server ms), ``every_ms`` how often it beats; the queues it serves,
    its concurrency, the jobs that failed on it and when it started (server
    ms) are optional (left out when not given; the admin's workers page shows
    them). ``stopped_ms``: the worker's last record, written as it stops."""
    record: dict[str, Any] = {
        "host": host,
        "pid": pid,
        "done": done,
        "running": running,
        "beat": beat_ms,
    }
    optional = {"every": every_ms, "queues": list(queues), "concurrency": concurrency,
                "failed": failed, "started": started_ms, "stopped": stopped_ms}  # fmt: skip
    record.update((k, v) for k, v in optional.items() if v not in (None, []))
    return json.dumps(record, separators=(",", ":"))


#: How long a stopped worker's last record is kept (ms): the workers page lists
#: it as stopped until then; a live worker's beat prunes it after.
STOPPED_KEPT_MS: Final = 15 * 60_000


def heartbeat_is_stale(raw: Any, now_ms: int, default_every_ms: int, after_beats: int) -> bool:
    """Whether a heartbeat record is older than ``after_beats`` of its worker's
    beats, or, for a stopped worker's last record, older than
    :data:`STOPPED_KEPT_MS` (an unreadable record is kept: it may be another
    version's)."""
    try:
        record = json.loads(raw)
        if record.get("stopped") is not None:
            return now_ms - int(record["stopped"]) > STOPPED_KEPT_MS
        every = int(record.get("every") or default_every_ms)
        return now_ms - int(record["beat"]) > after_beats * every
    except (ValueError, TypeError, KeyError, AttributeError):
        return False


def _optional_int(record: dict[str, Any], name: str) -> int | None:
    try:
        return None if record.get(name) is None else int(record[name])
    except (TypeError, ValueError):
        return None


def parse_heartbeat(worker_id: str, raw: Any) -> WorkerBeat:
    """A heartbeat record read back; an unreadable one keeps only its id, so the
    worker still shows up."""
    try:
        record = json.loads(raw)
        return WorkerBeat(
            worker_id,
            str(record["host"]),
            int(record["pid"]),
            int(record["done"]),
            int(record.get("running", 0)),
            int(record["beat"]),
            tuple(str(q) for q in record.get("queues") or () if isinstance(q, str)),
            _optional_int(record, "concurrency"),
            _optional_int(record, "failed"),
            _optional_int(record, "started"),
            int(record["every"]) if record.get("every") else None,
            _optional_int(record, "stopped"),
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        return WorkerBeat(worker_id, None, None, None, None, None)
