"""How the admin shows one job: its row turned into what the job page lists
(arguments pretty-printed and cut, every attempt with its worker, times,
outcome and error, the other failures, progress)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..engine.payload import decode
from ..engine.policies.progress import parse_progress
from ..engine.rows import Outcome, Row, WorkerBeat, attempt_history
from .display import (
    TRACEBACK_SHOWN,
    cut_traceback,
    error_message,
    moment,
    short_duration,
    split_error,
    state_word,
    worker_alive,
)

#: Characters of arguments or a result shown before "show all".
SHOWN = 2_000


def _int(value: str | None) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        return None


def pretty(raw: str | None) -> dict[str, Any]:
    """JSON kept on a row, indented; cut at :data:`SHOWN` characters (the whole
    text is kept for "show all")."""
    if raw is None or raw == "":
        return {"text": "", "cut": "", "long": False}
    try:
        text = json.dumps(decode(raw), indent=2, ensure_ascii=False, sort_keys=True)
    except ValueError:
        text = raw
    return {"text": text, "cut": text[:SHOWN], "long": len(text) > SHOWN}


#: Most attempts the page lists (a row edited by hand may claim any number).
MOST_ATTEMPTS = 1_000

#: Outcome -> label, translatable.
OUTCOME_LABELS = {
    Outcome.RUNNING: gettext_lazy("running now"),
    Outcome.DONE: gettext_lazy("done"),
    Outcome.FAILED: gettext_lazy("failed"),
    Outcome.EXPIRED: gettext_lazy("lease expired"),
    Outcome.RELEASED: gettext_lazy("released"),
    Outcome.UNRECORDED: gettext_lazy("ended, end not recorded"),
    Outcome.UNKNOWN: gettext_lazy("times not kept"),
}


def failures(row: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every failure the row keeps (the latest EMQ ``HISTORY`` of them), each
    numbered among all the job's failures: class, last line, traceback (cut
    to :data:`TRACEBACK_SHOWN` characters, the whole text kept for "show all")."""
    try:
        errors = json.loads(row.get(Row.ERRORS) or "[]")
    except ValueError:
        errors = []
    if not isinstance(errors, list):
        errors = []
    total = max(_int(row.get(Row.ERRORS_TOTAL)) or 0, len(errors))
    shown = []
    first = max(0, len(errors) - MOST_ATTEMPTS)  # a list edited by hand may hold any number
    for offset, error in enumerate(errors[first:], start=first):
        error_class, traceback = split_error(str(error))
        shown.append(
            {
                "number": total - len(errors) + offset + 1,
                "error_class": error_class,
                "error_line": error_message(error_class, traceback)
                if error_class
                else _last_line(traceback),
                "traceback": traceback,
                "traceback_cut": cut_traceback(traceback),
                "traceback_long": len(traceback) > TRACEBACK_SHOWN,
            }
        )
    return shown


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def lease_warning(deadline_ms: int | None, server_ms: int) -> str:
    """What is wrong with a running attempt's lease, if anything."""
    if deadline_ms is None:
        return _("it holds no lease: emq_doctor --repair puts the job back in its lane")
    if deadline_ms <= server_ms:
        return _(
            "its lease ran out %(ago)s ago (its worker died or froze): "
            "the next reap returns the job to its lane"
        ) % {"ago": short_duration(server_ms - deadline_ms)}
    return ""


def attempts(
    row: Mapping[str, str],
    view: tuple[int, int | None],
    beats: Mapping[str, WorkerBeat],
    by_number: Mapping[int, dict[str, Any]],
) -> tuple[list[dict[str, Any]], int]:
    """Every attempt the row keeps, oldest first: number, worker (``live``: it
    beat lately, so the workers page lists it), start and end (aware
    datetimes), how long it took (or has run so far), its outcome (for the
    running one, a warning when its lease is over), and for a failure its
    error from ``by_number`` (failures by number; ``None`` when the row no
    longer keeps that text). ``view`` is the server clock and the job's lease
    deadline. With how many earlier attempts the row no longer keeps."""
    server_ms, deadline_ms = view
    found = attempt_history(row, MOST_ATTEMPTS)
    shown = []
    for attempt in found.kept:
        beat = beats.get(attempt.worker)
        end = attempt.end_ms
        running = attempt.outcome == Outcome.RUNNING
        if end is None and running:
            end = server_ms
        shown.append(
            {
                "number": attempt.number,
                "worker": attempt.worker,
                "live": beat is not None and worker_alive(beat.beat_ms, server_ms),
                "started": moment(attempt.start_ms),
                "ended": moment(attempt.end_ms),
                "took": None
                if attempt.start_ms is None or end is None
                else short_duration(end - attempt.start_ms),
                "outcome": attempt.outcome,
                "label": OUTCOME_LABELS[attempt.outcome],
                "warning": lease_warning(deadline_ms, server_ms) if running else "",
                "failure_number": attempt.failure,
                "failure": None if attempt.failure is None else by_number.get(attempt.failure),
            }
        )
    return shown, found.forgotten


def _ran_ms(row: Mapping[str, str], server_ms: int, span_ms: int) -> int:
    """How long the job ran: the sum of its attempts' times (the running one's
    so far), so the back-off waits between them do not count. A row that keeps
    no attempt times (from before they were kept) has only its first start and
    its end: ``span_ms``. Attempts past ``EMQ["HISTORY"]`` are not kept, so
    their times are not in the sum (the page says how many there were)."""
    total, timed = 0, False
    for attempt in attempt_history(row, MOST_ATTEMPTS).kept:
        end = attempt.end_ms
        if end is None and attempt.outcome == Outcome.RUNNING:
            end = server_ms
        if attempt.start_ms is None or end is None:
            continue
        total += max(0, end - attempt.start_ms)
        timed = True
    return total if timed else span_ms


def _due_since(enqueued: int, due: int | None, started: int) -> int:
    """When a job's wait began: its enqueue, or its due time when it was deferred
    (a due time after its first start is a retry's back-off, not a deferral)."""
    return max(enqueued, due) if due is not None and due <= started else enqueued


def job_facts(
    row: Mapping[str, str],
    server_ms: int,
    beats: Mapping[str, WorkerBeat] | None = None,
    deadline_ms: int | None = None,
) -> dict[str, Any]:
    """What the job page shows of a row (times as aware datetimes); ``beats``
    are the heartbeats of its workers that have one, ``deadline_ms`` its lease
    deadline (``None``: it holds no lease)."""
    kept_failures = failures(row)
    by_number = {failure["number"]: failure for failure in kept_failures}
    tries, forgotten = attempts(row, (server_ms, deadline_ms), beats or {}, by_number)
    tied = {t["failure_number"] for t in tries}
    enqueued, started = _int(row.get(Row.ENQUEUED)), _int(row.get(Row.STARTED))
    claimed, finished = _int(row.get(Row.CLAIMED)), _int(row.get(Row.FINISHED))
    end = finished if finished is not None else server_ms
    progress = parse_progress(row.get(Row.PROGRESS))
    return {
        "state": row.get(Row.STATE, ""),
        "state_word": state_word(row.get(Row.STATE, "")),
        "task": row.get(Row.TASK, ""),
        "lane": row.get(Row.LANE, ""),
        "token": _int(row.get(Row.ATTEMPTS)) or 0,
        "fails": _int(row.get(Row.FAILS)) or 0,
        "max_attempts": _int(row.get(Row.MAX_ATTEMPTS)),
        "enqueued": moment(enqueued),
        "due": moment(_int(row.get(Row.DUE))),
        "started": moment(started),
        "claimed": moment(claimed),
        "finished": moment(finished),
        "waited": None
        if enqueued is None or started is None
        else short_duration(started - _due_since(enqueued, _int(row.get(Row.DUE)), started)),
        "ran": None if started is None else short_duration(_ran_ms(row, server_ms, end - started)),
        "cancel_asked": moment(_int(row.get(Row.CANCEL))),
        "args": pretty(row.get(Row.ARGS)),
        "kwargs": pretty(row.get(Row.KWARGS)),
        "result": pretty(row.get(Row.RESULT)) if row.get(Row.STATE) == "done" else None,
        "attempts": tries,
        "attempts_forgotten": forgotten,
        "attempts_total": forgotten + len(tries),
        # failures no attempt shown here stands for (a cancel before it ran,
        # a row from before attempt times were kept)
        "failures": [f for f in kept_failures if f["number"] not in tied],
        "progress": progress,
        "progress_at": None if progress is None else moment(progress.at_ms),
    }
