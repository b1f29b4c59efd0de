"""The doctor's look at the history's keys (``lua/includes/history.lua``):
a minute's hash or a lane wait hash holding a field no script writes, or a
count that is no whole number, and a member of the finished window that is no
job id. Such an entry is a hand edit: the readers skip it (or read it as 0),
so it never fails a scrape, but it is reported, and a repair removes it.

Each key is read by ``HSCAN`` / ``ZSCAN`` steps of the doctor's batch; a
removal is one ``HDEL`` / ``ZREM`` of entries no script writes, so a live
worker's counts are never touched.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import Any

from .history import COUNTERS, lane_field, wait_field
from .ids import is_job_id
from .keys import QueueKeys
from .payload import text

#: ``found(what, subject, detail)``: how a finding is reported.
Found = Callable[[str, str, str], None]


def is_history_key(keys: QueueKeys, key: str) -> bool:
    """Whether ``key`` is one of the history's (a minute, an hour of lane
    waits, the finished window)."""
    rest = key.removeprefix(keys.prefix)
    return key == keys.finished or rest.startswith(("m:", "lw:"))


def _minute_field(name: str) -> bool:
    return name in COUNTERS or wait_field(name) is not None


def _lane_field(name: str) -> bool:
    return lane_field(name) is not None


def _whole(value: object) -> bool:
    digits = text(value).removeprefix("-")
    return digits.isascii() and digits.isdigit()


def _flaw(known: Callable[[str], bool], name: str, value: object) -> str | None:
    """What is wrong with a history hash's field, if anything."""
    if not known(name):
        return "no field the scripts write"
    if not _whole(value):
        return f"{text(value)!r} is no count"
    return None


def check(r: Any, keys: QueueKeys, key: str, batch: int, found: Found, repair: bool) -> int:
    """Report each garbage entry of history key ``key`` through ``found``; with
    ``repair``, remove them. Returns how many were removed."""
    # Each entry is removed as the server holds it (raw): one that is not UTF-8
    # is shown with U+FFFD in its report, and removed all the same.
    if key == keys.finished:
        bad = [m for m, _ in r.zscan_iter(key, count=batch) if not is_job_id(text(m))]
        for member in bad:
            found("history", text(member), f"in {key}: no job id" + (", removed" if repair else ""))
        return _remove(r, key, bad, batch, r.zrem) if repair else 0
    known = _minute_field if key.removeprefix(keys.prefix).startswith("m:") else _lane_field
    fields = r.hscan_iter(key, count=batch)
    garbage = [(f, flaw) for f, v in fields if (flaw := _flaw(known, text(f), v)) is not None]
    for name, flaw in garbage:
        found("history", text(name), f"in {key}: {flaw}" + (", removed" if repair else ""))
    names = [name for name, _ in garbage]
    return _remove(r, key, names, batch, r.hdel) if repair else 0


def _remove(r: Any, key: str, names: list[Any], batch: int, command: Any) -> int:
    removed = 0
    it = iter(names)
    while chunk := list(islice(it, batch)):
        removed += int(command(key, *chunk))
    return removed
