"""Progress (``docs/django.md``): a running job keeps how far it got and a
short note on its row (one small write, ``lua/progress-1.lua``); readers
parse it with :func:`parse_progress`. Nothing on the hot path reads it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from .. import ops
from ..ids import validate_job_id
from ..payload import text
from .base import Policy, Routed

#: Longest progress note kept (longer ones are cut).
MAX_NOTE = 200


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


POLICY = Policy(name="progress", doc="django.md#cancelling-and-progress", lua=("progress-1.lua",))


class Calls(Routed):
    """``report_progress``, for ``Queue`` and ``ShardedQueue``."""

    def report_progress(self, job_id: str, done: float, note: str = "") -> bool:
        """Keep ``done`` (0..1) and a short note on a running job's row (one small
        write). Answers False when the job is not running (nothing is written)."""
        home = self.shard_for_job(validate_job_id(job_id))
        if isinstance(done, bool) or not isinstance(done, int | float) or math.isnan(done):
            raise ValueError(f"done must be a number from 0 to 1, not {done!r}")
        if not 0 <= done <= 1:
            raise ValueError(f"done must be from 0 to 1, not {done!r}")
        return home.runner.run(ops.progress(home, job_id, float(done), str(note)[:MAX_NOTE]))
