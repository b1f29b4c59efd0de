"""Every exception the engine raises, the map from Lua return codes to them,
and ``UNAVAILABLE``, the errors that mean "the server cannot answer now".

The Django layer adds ``django_emq.exceptions.ConfigurationError``;
``django_emq.exceptions`` re-exports everything here.
"""

from __future__ import annotations

import re

import redis
from redis.exceptions import ClusterDownError, RedisClusterException, TryAgainError


class EMQError(Exception):
    """Base class of every django-emq error."""


class ScriptError(EMQError):
    """A Lua file is malformed (bad name, missing or cyclic include), or a
    script was called with the wrong number of keys."""


class EnqueueError(EMQError):
    """A job could not be enqueued (the server is unreachable or refused it)."""


class LaneFull(EnqueueError):
    """The lane holds its max depth of pending jobs already: nothing was written.

    A view turns it into ``429 Too Many Requests``. ``lane`` names the lane,
    ``max_depth`` its limit.
    """

    def __init__(self, lane: str, max_depth: int) -> None:
        super().__init__(f"lane {lane} is full: it holds its max depth of {max_depth} pending jobs")
        self.lane = lane
        self.max_depth = max_depth


class InvalidArguments(EMQError, TypeError, ValueError):
    """Task arguments that do not survive a JSON round trip, or are too large;
    also a call's argument of the wrong kind (one ``str`` where a collection
    of ids belongs) or beyond its documented bound.

    A ``TypeError``, as django.tasks raises for arguments JSON cannot hold, and
    a ``ValueError``, as django-emq raised before."""


class JobError(EMQError):
    """An operation on one job was refused; nothing changed."""

    def __init__(self, job_id: str, message: str) -> None:
        super().__init__(f"job {job_id}: {message}")
        self.job_id = job_id


class JobNotFound(JobError, LookupError):
    """No job row with that id (never enqueued, or its result expired)."""


class StaleToken(JobError):
    """The fencing token is not the job's current attempt: the lease moved on.

    A worker whose lease expired gets this on complete, retry, extend or
    release; the newer attempt's outcome stands.
    """


class InvalidJobState(JobError):
    """The job is not in a state the operation accepts (e.g. moving an active job)."""


class LeaseExpired(JobError):
    """The error a job is left dead with when its lease expired as many times as
    its max attempts: the worker running it died or froze every time. Kept on
    the row by the reaper; never raised."""


class CorruptJob(JobError):
    """A claimed job's row is missing fields or holds values that cannot be read
    (edited by hand, or written by something else): it can never run, so the
    worker makes it dead with this error."""


class JobCancelled(JobError):
    """The error a job is left with when it was cancelled before it ran (or its
    task stopped when asked to). Kept on the row; raise it from a task that
    honours ``django_emq.cancel_requested`` to end failed with it at once,
    never retried (a task that returns instead ends done)."""


class CorruptKeyspace(EMQError, redis.ResponseError):
    """A key of the queue holds a value of the wrong type (edited by hand, or
    written by something else): the script found it before its first write,
    so nothing changed. ``key`` names it (``None`` when the server did not
    say). Run ``manage.py emq_doctor`` to find and mend what is wrong.

    A ``redis.ResponseError`` too, so code that rides out a server's refusals
    (the worker) rides this out as well."""

    def __init__(self, key: str | None, detail: str) -> None:
        where = f"{key} " if key else "a key of the queue "
        super().__init__(f"{where}{detail}: the keyspace is damaged; run manage.py emq_doctor")
        self.key = key
        self.detail = detail


#: Negative codes returned by the Lua scripts, in one place.
NO_JOB = -1
STALE_TOKEN = -2
BAD_STATE = -3
#: The enqueue script's code for a lane at its max depth.
LANE_FULL = -4
#: The enqueue script's code for a schedule's tick that is enqueued already.
TICKED = -5

_CODES: dict[int, tuple[type[JobError], str]] = {
    NO_JOB: (JobNotFound, "no such job"),
    STALE_TOKEN: (StaleToken, "stale token: the job was claimed again since"),
    BAD_STATE: (InvalidJobState, "not in a state this operation accepts"),
}


def check_code(reply: object, job_id: str) -> None:
    """Raise the exception a negative script reply stands for; do nothing otherwise."""
    error = refusal(reply, job_id)
    if error is not None:
        raise error


def refusal(reply: object, job_id: str) -> JobError | None:
    """The exception a negative script reply stands for, or ``None``."""
    if isinstance(reply, int) and reply < 0:
        cls, message = _CODES[reply]
        return cls(job_id, message)
    return None


#: The error reply of a script's check (lua/includes/check.lua): EMQCORRUPT <key> <detail>.
_CORRUPT_RE = re.compile(r"EMQCORRUPT (\S+) (.*?)(?: script: .*)?$", re.DOTALL)


def script_error(exc: Exception) -> Exception:
    """What a script's error reply stands for: ``CorruptKeyspace`` for a
    key of the wrong type (named by the script's checks, or a bare WRONGTYPE
    the checks did not name), else ``exc`` itself."""
    if not isinstance(exc, redis.ResponseError) or isinstance(exc, CorruptKeyspace):
        return exc
    message = str(exc)
    match = _CORRUPT_RE.match(message)
    if match:
        return CorruptKeyspace(match.group(1), match.group(2))
    if "WRONGTYPE" in message:
        return CorruptKeyspace(None, "holds the wrong type (WRONGTYPE)")
    return exc


def unreachable(exc: BaseException) -> str:
    """Why the server did not answer, in words for a log line or an error: a
    server that refused the credentials is said to have refused them (a wrong
    password is not an outage), anything else is "could not reach Valkey"."""
    text = str(exc)
    if isinstance(exc, redis.AuthenticationError) or "WRONGPASS" in text or "NOAUTH" in text:
        return (
            f"Valkey refused the credentials ({text}): check the user and password "
            "in the server URL"
        )
    return f"could not reach Valkey ({text})"


#: What a call raises while its server (on a cluster: the node of its slot) cannot
#: answer for now: unreachable or timed out; on a cluster also ``CLUSTERDOWN`` and
#: ``TRYAGAIN`` (a failover or a slot migration under way) and the cluster client's
#: own errors when no node it knows answers or serves the slot. Worth retrying.
UNAVAILABLE: tuple[type[Exception], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    ClusterDownError,
    TryAgainError,
    RedisClusterException,
)

# The public path of these classes is ``django_emq.exceptions`` (it re-exports
# them): task results store an error's class path, and that path must not move
# when the engine's layout does.
for _cls in (
    EMQError,
    ScriptError,
    EnqueueError,
    LaneFull,
    InvalidArguments,
    JobError,
    JobNotFound,
    StaleToken,
    InvalidJobState,
    LeaseExpired,
    CorruptJob,
    JobCancelled,
    CorruptKeyspace,
):
    _cls.__module__ = "django_emq.exceptions"
