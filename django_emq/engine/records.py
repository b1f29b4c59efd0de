"""The typed values the engine takes and answers: a job to enqueue
(``JobSpec``), a claim to make (``ClaimRequest``), what enqueue and
claim answer (``Enqueued``, ``Claim``), what the observability calls
answer (``LaneInfo``, ``Totals``), and the checks and reply parsing
every queue shares (the claim reply's: :mod:`.claim_reply`). One definition
each: a plain queue and a sharded queue both speak in these.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from .exceptions import LANE_FULL, TICKED, JobError, LaneFull, refusal
from .payload import encode_result, text

#: Largest weight a lane may carry: one turn serves at most this many of its jobs.
MAX_WEIGHT = 1000
#: Largest ``max_attempts`` (and ``max_expiries``): with the back-off capped at
#: its default 300 s, a job failing this often is retried for over a month.
MAX_ATTEMPTS_LIMIT = 10_000
#: Largest concurrency ceiling of a lane or a tenant: far above any pool of
#: workers, well inside what a Lua number (a double) holds exactly.
MAX_CEILING = 1_000_000
#: Largest max depth of a lane (pending jobs it may hold).
MAX_DEPTH_LIMIT = 1_000_000_000
#: How far in the past a ``run_after`` may be before it is taken for a mistake.
RUN_AFTER_PAST_LIMIT = timedelta(days=1)
WORKER_ID_RE = re.compile(r"[A-Za-z0-9_.:@-]{1,128}")
#: Most outcomes one ``complete_many`` call records.
MAX_BATCH = 1000
#: Longest lease a claim or an extension may ask for (24 hours, in ms): a worker
#: extends a running job's lease on every beat, so no job needs a longer one.
MAX_LEASE_MS = 24 * 60 * 60 * 1000
#: Longest back-off a retry may ask for (one year, in ms).
MAX_DELAY_MS = 366 * 24 * 60 * 60 * 1000
#: How many of the latest worker ids and errors a job's row keeps by default
#: (``EMQ["HISTORY"]``); its ``attempts`` and ``errors_total`` count them all.
DEFAULT_HISTORY = 10


def default_worker_id() -> str:
    """``host:pid`` — what a worker records on the jobs it claims."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job to enqueue: everything ``enqueue`` takes, in one value.

    ``job_id`` (``None``: mint one), ``run_after`` (aware; ``None``: now),
    ``max_attempts`` (``None``: the queue's), ``meta`` (kept on the row) and
    ``unique_key`` (at most one unfinished job per key and lane) are optional.
    Checked when a queue prepares it, never half-written.
    """

    lane: str
    task_path: str
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] | None = None
    job_id: str | None = None
    run_after: datetime | None = None
    max_attempts: int | None = None
    meta: Mapping[str, Any] | None = None
    unique_key: str | None = None
    #: ``(schedule name, tick ms)``: a periodic schedule's tick, enqueued once
    #: however many workers try (the schedule's last tick must be older).
    tick: tuple[str, int] | None = None
    #: The lane's tenant (a tenant id): workers rotate across tenants first, then
    #: across the lanes of each. ``None`` keeps the lane's recorded tenant.
    tenant: str | None = None

    @classmethod
    def of(cls, job: JobSpec | Mapping[str, Any]) -> JobSpec:
        """A spec from a spec, or from a mapping of ``enqueue``'s arguments by name."""
        if isinstance(job, JobSpec):
            return job
        if not isinstance(job, Mapping):
            raise TypeError(f"a job is a JobSpec or a mapping, not {type(job).__name__}")
        unknown = set(job) - set(cls.__slots__)
        if unknown:
            raise TypeError(f"unknown job fields: {', '.join(sorted(unknown))}")
        return cls(**job)


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """One claim: the lease to take, how many turns of the ring, who claims,
    and the most jobs it may return (a worker passes its free slots)."""

    lease_ms: int
    turns: int = 1
    worker_id: str | None = None
    max_jobs: int | None = None
    #: Filled in by ``checked``: the worker id recorded on the jobs.
    worker: str = field(default="", compare=False)

    def checked(self) -> ClaimRequest:
        """This request validated, with its defaults filled in; ``ValueError`` if bad."""
        positive_int("lease_ms", self.lease_ms, MAX_LEASE_MS)
        positive_int("turns", self.turns, MAX_WEIGHT)
        limit = (
            self.turns * MAX_WEIGHT
            if self.max_jobs is None
            else positive_int("max_jobs", self.max_jobs)
        )
        worker = self.worker_id or default_worker_id()
        if not WORKER_ID_RE.fullmatch(worker):
            raise ValueError(f"{worker!r} is not a worker id: use 1-128 of A-Z a-z 0-9 _ . : @ -")
        return ClaimRequest(self.lease_ms, self.turns, self.worker_id, limit, worker)


@dataclass(frozen=True, slots=True)
class Enqueued:
    """What enqueue answers: the job id, its state, whether it existed already,
    and the row's enqueue time (the server's clock, epoch ms)."""

    job_id: str
    state: str
    duplicate: bool
    enqueued_ms: int = 0


@dataclass(frozen=True, slots=True)
class Claim:
    """One claimed job. ``token`` (its attempt number) fences every later call."""

    job_id: str
    lane: str
    token: int
    task_path: str
    args: list[Any]
    kwargs: dict[str, Any]
    enqueued_ms: int
    deadline_ms: int
    worker_ids: tuple[str, ...] = ()
    started_ms: int = 0
    #: Times its lease expired before (a worker died or froze running it). Such a
    #: job ends its claim, and a worker records what it finished before running it.
    expiries: int = 0
    #: Why the job cannot run (its row is corrupt: a field missing or unreadable);
    #: ``None`` for a sound job. A worker makes such a job dead at once.
    defect: str | None = None


@dataclass(frozen=True, slots=True)
class LaneInfo:
    """One lane as the observability calls see it."""

    lane: str
    depth: int
    inflight: int
    ceiling: int | None
    weight: int
    paused: bool
    #: The lane's own max depth (``None``: the queue's default applies, if any).
    max_depth: int | None = None
    #: The lane's own rate limit, ``(count, per_seconds)`` (``None``: the queue's, if any).
    rate: tuple[int, float] | None = None
    #: When a throttled lane may start its next job (server ms); ``None``: not throttled.
    throttled_until_ms: int | None = None
    #: A time-fair queue's lane: its credit of worker time, ms (negative: in debt;
    #: see docs/time-fair.md). ``None``: the queue is count-fair.
    credit_ms: int | None = None
    #: The lane's tenant (``None``: untenanted; see ``engine/policies/tenants.py``).
    tenant: str | None = None


@dataclass(frozen=True, slots=True)
class Totals:
    """Queue-wide counts, each read in O(1)."""

    pending: int
    active: int
    scheduled: int
    dead: int
    lanes: int
    ring: int
    #: Rate-limited lanes off the ring until their next slot.
    throttled: int = 0


#: Most jobs a rate limit may allow per period (the lane keeps that many start times).
MAX_RATE_COUNT = 10_000
#: Longest period of a rate limit, in seconds (a week).
MAX_RATE_PERIOD = 7 * 24 * 3600


def rate_limit(count: object, per_seconds: object) -> tuple[int, int]:
    """``(count, per_ms)`` of "at most ``count`` jobs started per ``per_seconds``";
    ``ValueError`` if either is out of range."""
    positive_int("count", count, MAX_RATE_COUNT)
    if isinstance(per_seconds, timedelta):
        per_seconds = per_seconds.total_seconds()
    if isinstance(per_seconds, bool) or not isinstance(per_seconds, int | float):
        raise ValueError(f"per_seconds must be a number of seconds, not {per_seconds!r}")
    # NaN, the infinities and numbers past the bound fail the test (no overflow)
    in_reach = 0 <= per_seconds <= MAX_RATE_PERIOD + 1
    per_ms = round(per_seconds * 1000) if in_reach else 0
    if not 1 <= per_ms <= MAX_RATE_PERIOD * 1000:
        raise ValueError(
            f"per_seconds must be from 0.001 to {MAX_RATE_PERIOD} (a week), not {per_seconds!r}"
        )
    assert isinstance(count, int)
    return count, per_ms


#: How a queue shares its workers among lanes: ``count`` (a lane's turn is a
#: number of jobs, the default) or ``time`` (a lane's turn is worker time:
#: deficit round robin, ``lua/includes/timeshare.lua``).
FAIRNESS_MODES = ("count", "time")


def fairness_mode(value: object) -> str:
    """``value`` checked to be one of ``FAIRNESS_MODES``; ``ValueError`` otherwise."""
    if not isinstance(value, str) or value not in FAIRNESS_MODES:
        raise ValueError(f"fairness must be 'count' or 'time', not {value!r}")
    return value


def fairness_arg(fairness: str) -> str:
    """A queue's fairness as the claim scripts read it: ``time``, or '' for count-fair."""
    return "time" if fairness == "time" else ""


def rate_arg(rate: tuple[int, int] | None) -> str:
    """A rate limit ``(count, per_ms)`` as the scripts read it: ``<count>:<per_ms>``."""
    return "" if rate is None else f"{rate[0]}:{rate[1]}"


SCHEDULE_NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def tick_arg(tick: object) -> tuple[str, int] | None:
    """A checked ``(schedule name, tick ms)``; ``ValueError`` if bad."""
    if tick is None:
        return None
    if not isinstance(tick, tuple) or len(tick) != 2:
        raise ValueError(f"tick must be a (schedule name, tick ms) pair, not {tick!r}")
    name, when = tick
    if not isinstance(name, str) or not SCHEDULE_NAME_RE.fullmatch(name):
        raise ValueError(f"{name!r} is not a schedule name: use 1-100 of A-Z a-z 0-9 _ . -")
    return name, positive_int("tick", when)


#: Longest unique key (``JobSpec.unique_key``), in characters.
MAX_UNIQUE_KEY = 200


def unique_key_arg(key: object) -> str:
    """The enqueue script's unique-key argument ('' for none); ``ValueError`` if bad."""
    if key is None:
        return ""
    if not isinstance(key, str) or not key or len(key) > MAX_UNIQUE_KEY:
        raise ValueError(
            f"unique_key must be a str of 1 to {MAX_UNIQUE_KEY} characters, not {key!r}"
        )
    if not key.isprintable():
        raise ValueError(f"unique_key must be printable text, not {key!r}")
    return key


def as_int(value: Any, default: int = 0) -> int:
    return default if value is None else int(value)


def positive_int(name: str, value: object, maximum: int | None = None, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, not {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, not {value}")
    return value


def error_text(error: object) -> str:
    """An error text as UTF-8 can carry it: a lone surrogate (from a task's
    message) becomes ``?`` rather than failing the call that records it."""
    if not isinstance(error, str):
        raise TypeError(f"an error text is a str, not {type(error).__name__}")
    return error if error.isascii() else error.encode("utf-8", "replace").decode("utf-8")


def run_after_ms(run_after: datetime | None) -> int:
    """Epoch milliseconds for ``run_after``; 0 means now. Refuses naive or stale times."""
    if run_after is None:
        return 0
    if not isinstance(run_after, datetime):
        raise ValueError(f"run_after must be a datetime, not {type(run_after).__name__}")
    if run_after.tzinfo is None or run_after.utcoffset() is None:
        raise ValueError("run_after must be timezone-aware (use django.utils.timezone.now())")
    if run_after < datetime.now(UTC) - RUN_AFTER_PAST_LIMIT:
        raise ValueError(f"run_after {run_after.isoformat()} is more than a day in the past")
    return int(run_after.timestamp() * 1000)


def lenient_int(value: Any) -> int:
    """A number read from the server (a row's timestamp, a hash's count); 0 when
    it is missing or unreadable (a hand edit), or too large to be one (an
    infinite score)."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return 0


def encode_outcomes(outcomes: Sequence[tuple[str, int, Any]]) -> list[tuple[str, int, str]]:
    """Check ``(job_id, token, result)`` outcomes and encode their results;
    raises on bad input (nothing has been sent then)."""
    if isinstance(outcomes, str | bytes) or not isinstance(outcomes, Sequence):
        raise TypeError("outcomes must be a sequence of (job_id, token, result) tuples")
    if len(outcomes) > MAX_BATCH:
        raise ValueError(f"at most {MAX_BATCH} outcomes per call, not {len(outcomes)}")
    encoded: list[tuple[str, int, str]] = []
    for entry in outcomes:
        if not isinstance(entry, tuple) or len(entry) != 3:
            raise TypeError(f"each outcome is a (job_id, token, result) tuple, not {entry!r}")
        job_id, token, result = entry
        if not isinstance(job_id, str) or not job_id:
            raise ValueError(f"job_id must be a non-empty str, not {job_id!r}")
        positive_int("token", token)
        encoded.append((job_id, token, encode_result(result)))
    return encoded


def parse_enqueued(job_id: str, lane: str, reply: Sequence[Any]) -> Enqueued:
    """The enqueue script's reply ``{new?, state, enq[, holder]}`` for job
    ``job_id`` on ``lane``; raises ``LaneFull`` when the lane held its max
    depth (``{-4, max}``: nothing was written). A job holding the same unique
    key answers in its place (``duplicate``, its own id and enqueue time)."""
    code = int(reply[0])
    if code == LANE_FULL:
        raise LaneFull(lane, int(reply[1]))
    if code == TICKED:  # another worker enqueued this tick: its job answers
        return Enqueued(text(reply[2]), "ticked", True, 0)
    holder = text(reply[3]) if len(reply) > 3 else job_id
    return Enqueued(holder, text(reply[1]), code == 0, as_int(reply[2]))


def refusals(job_ids: Sequence[object], codes: Sequence[int]) -> list[JobError | None]:
    """The complete script's codes, one per job, as refusals."""
    return [refusal(code, str(job_id)) for code, job_id in zip(codes, job_ids, strict=True)]
