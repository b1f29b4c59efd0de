"""How the admin shows one job: its row turned into what the job page lists
(arguments pretty-printed and cut, every attempt's error, times, progress)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..engine.jobs import parse_progress
from ..engine.payload import decode
from ..engine.rows import Row, worker_ids
from .display import duration, moment, split_error

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


def attempts(row: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every attempt (claim): its number and the worker that ran it (``?`` for
    claims older than the row keeps, EMQ ``HISTORY``)."""
    claims = _int(row.get(Row.ATTEMPTS)) or 0
    return [
        {"number": number, "worker": worker}
        for number, worker in enumerate(worker_ids(row.get(Row.WORKERS, ""), claims), start=1)
    ]


def failures(row: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every failure the row keeps (the latest EMQ ``HISTORY`` of them), each
    numbered among all the job's failures: class, last line, traceback."""
    try:
        errors = json.loads(row.get(Row.ERRORS) or "[]")
    except ValueError:
        errors = []
    if not isinstance(errors, list):
        errors = []
    total = _int(row.get(Row.ERRORS_TOTAL)) or len(errors)
    shown = []
    for offset, error in enumerate(errors):
        error_class, traceback = split_error(str(error))
        shown.append(
            {
                "number": total - len(errors) + offset + 1,
                "error_class": error_class,
                "error_line": traceback.strip().splitlines()[-1] if traceback.strip() else "",
                "traceback": traceback,
            }
        )
    return shown


def job_facts(row: Mapping[str, str], server_ms: int) -> dict[str, Any]:
    """What the job page shows of a row (times as aware datetimes)."""
    enqueued, started = _int(row.get(Row.ENQUEUED)), _int(row.get(Row.STARTED))
    claimed, finished = _int(row.get(Row.CLAIMED)), _int(row.get(Row.FINISHED))
    end = finished if finished is not None else server_ms
    progress = parse_progress(row.get(Row.PROGRESS))
    return {
        "state": row.get(Row.STATE, ""),
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
        "waited": None if enqueued is None or started is None else duration(started - enqueued),
        "ran": None if started is None else duration(end - started),
        "cancel_asked": moment(_int(row.get(Row.CANCEL))),
        "args": pretty(row.get(Row.ARGS)),
        "kwargs": pretty(row.get(Row.KWARGS)),
        "result": pretty(row.get(Row.RESULT)) if row.get(Row.STATE) == "done" else None,
        "attempts": attempts(row),
        "failures": failures(row),
        "progress": progress,
        "progress_at": None if progress is None else moment(progress.at_ms),
    }
