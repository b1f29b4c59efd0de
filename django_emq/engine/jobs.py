"""Job control on one queue: cancel a job that has not started, ask a running
one to stop, and let a running job report its progress. Each call is one
script (or one read) on the job's own keys, O(1) in the number of lanes."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import ops
from .ids import validate_job_id
from .keys import QueueKeys
from .payload import text
from .runner import SyncRunner

if TYPE_CHECKING:
    from .client import Client

#: Longest progress note kept (longer ones are cut).
MAX_NOTE = 200
#: The error a cancelled job is left with (django.tasks' TaskError fields).
CANCELLED_ERROR = json.dumps(
    {
        "exception_class_path": "django_emq.exceptions.JobCancelled",
        "traceback": "django_emq.exceptions.JobCancelled: cancelled before it ran",
    }
)


@dataclass(frozen=True, slots=True)
class Progress:
    """What a running job last reported: ``done`` in 0..1, a note, when (server ms)."""

    done: float
    note: str
    at_ms: int


def parse_progress(raw: Any) -> Progress | None:
    """The ``progress`` field of a row, or ``None`` when unset or unreadable (a
    row edited by hand: ``done`` that is no finite number); ``done`` is held to
    0..1."""
    if raw is None or raw == "":
        return None
    try:
        data = json.loads(text(raw))
        note = data.get("note", "")
        done = float(data["done"])
        if not math.isfinite(done):
            return None
        return Progress(min(1.0, max(0.0, done)), "" if note is None else str(note),
                        int(data["at"]))  # fmt: skip
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
        return None


class JobControl:
    """``cancel``, ``cancel_requested`` and ``report_progress``, for ``Queue``."""

    keys: QueueKeys
    result_ttl_ms: int
    history: int
    max_expiries: int
    rate: tuple[int, int] | None
    fairness: str
    connection: Client

    runner: SyncRunner

    def cancel(self, job_id: str) -> str:
        """Cancel job ``job_id``.

        A pending or scheduled job never runs: it is ``cancelled`` at once
        (answers ``"cancelled"``) and reads back as a failed result whose error
        is ``django_emq.exceptions.JobCancelled``. A running job is asked to
        stop (answers ``"requested"``): its task sees
        ``django_emq.cancel_requested`` turn true and stops at a point of
        its own choosing. Raises ``JobNotFound`` for no such job and
        ``InvalidJobState`` for one that has finished (nothing changes then).
        """
        validate_job_id(job_id)
        return self.runner.run(ops.cancel(self, job_id, CANCELLED_ERROR))

    def run_now(self, job_id: str) -> None:
        """Make a scheduled job (deferred, or backing off) due now and move every
        due job into its lane. ``InvalidJobState`` for a job that is not scheduled."""
        validate_job_id(job_id)
        self.runner.run(ops.due_now(self, job_id))
        self.promote()

    def promote(self) -> tuple[int, int | None]:
        raise NotImplementedError

    def cancel_requested(self, job_id: str) -> bool:
        """Whether a cancel was asked for job ``job_id`` (one read)."""
        validate_job_id(job_id)
        return bool(self.connection.hexists(self.keys.job(job_id), "cancel"))

    def report_progress(self, job_id: str, done: float, note: str = "") -> bool:
        """Keep ``done`` (0..1) and a short note on a running job's row (one small
        write). Answers False when the job is not running (nothing is written)."""
        validate_job_id(job_id)
        if isinstance(done, bool) or not isinstance(done, int | float) or math.isnan(done):
            raise ValueError(f"done must be a number from 0 to 1, not {done!r}")
        if not 0 <= done <= 1:
            raise ValueError(f"done must be from 0 to 1, not {done!r}")
        return self.runner.run(ops.progress(self, job_id, float(done), str(note)[:MAX_NOTE]))
