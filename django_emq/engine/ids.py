"""Branded ids: lane names and job ids, validated before they reach a key.

A branded id is a brand of three upper-case letters followed by a fixed-width
base62 number. The base62 alphabet is in ASCII order (``0-9A-Za-z``) and the
number is left-padded, so branded ids sort the way their numbers do.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterable
from typing import Any

from .exceptions import InvalidArguments

ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_INDEX = {c: i for i, c in enumerate(ALPHABET)}

#: Width of the number in a lane id: 11 base62 digits hold any 64-bit pk.
LANE_WIDTH = 11
#: Width used for 128-bit keys (UUID primary keys).
WIDE_LANE_WIDTH = 22

BRAND_RE = re.compile(r"[A-Z]{3}")
LANE_RE = re.compile(r"[A-Z]{3}(?:[0-9A-Za-z]{11}|[0-9A-Za-z]{22})")
QUEUE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
JOB_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
TASK_PATH_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")

JOB_BRAND = "JOB"


def base62(n: int, width: int) -> str:
    """Encode a non-negative integer in base62, left-padded to ``width``."""
    if n < 0:
        raise ValueError(f"base62 takes a non-negative integer, not {n}")
    digits = []
    rest = n
    while rest:
        rest, r = divmod(rest, 62)
        digits.append(ALPHABET[r])
    text = "".join(reversed(digits)).rjust(width, "0")
    if len(text) > width:
        raise ValueError(f"{n} does not fit in {width} base62 digits")
    return text


def unbase62(text: str) -> int:
    """Decode a base62 string made by ``base62``."""
    n = 0
    for c in text:
        try:
            n = n * 62 + _INDEX[c]
        except KeyError:
            raise ValueError(f"{text!r} is not base62") from None
    return n


def lane_id(brand: str, pk: int, *, wide: bool = False) -> str:
    """Build the lane id for producer ``pk`` under ``brand``: ``lane_id("USR", 42)``.

    Integer pks take 11 digits; ``wide=True`` (UUID keys, as ``lane_for``
    passes) takes 22 whatever the value, so every lane id of one brand and
    key kind has the same width and ids sort like their numbers.
    """
    if not isinstance(brand, str) or not BRAND_RE.fullmatch(brand):
        raise ValueError(f"a lane brand is three upper-case letters A-Z, not {brand!r}")
    if isinstance(pk, bool) or not isinstance(pk, int):
        raise ValueError(f"a lane number is an int, not {type(pk).__name__}")
    if pk < 0:
        raise ValueError(f"a lane number cannot be negative ({pk})")
    width = WIDE_LANE_WIDTH if wide or pk >= 62**LANE_WIDTH else LANE_WIDTH
    if pk >= 62**WIDE_LANE_WIDTH:
        raise ValueError(f"{pk} is too large for a lane id")
    return brand + base62(pk, width)


def validate_lane(lane: object) -> str:
    """Return ``lane`` if it is a branded lane id, else raise ``ValueError``."""
    if not isinstance(lane, str) or not LANE_RE.fullmatch(lane):
        raise ValueError(
            f"{lane!r} is not a lane id: a lane id is a 3-letter upper-case brand plus "
            f"{LANE_WIDTH} (or {WIDE_LANE_WIDTH}) base62 digits; build one with "
            "django_emq.lane_id(brand, pk)"
        )
    return lane


def validate_tenant(tenant: object) -> str:
    """Return ``tenant`` if it is a branded id (a tenant id is spelled like a lane
    id: ``lane_id(brand, pk)``), else raise ``ValueError``."""
    if not isinstance(tenant, str) or not LANE_RE.fullmatch(tenant):
        raise ValueError(
            f"{tenant!r} is not a tenant id: a tenant id is a 3-letter upper-case brand plus "
            f"{LANE_WIDTH} (or {WIDE_LANE_WIDTH}) base62 digits; build one with "
            "django_emq.lane_id(brand, pk)"
        )
    return tenant


#: The mark of a tenant's entry on the top ring (and in the lanes' hashes):
#: ``@<tenant>``. No lane id holds it, so an entry needs no lookup to be told apart.
TENANT_MARK = "@"


def tenant_entry(tenant: str) -> str:
    """The name that stands for ``tenant`` on the top ring and in the lanes' hashes."""
    return TENANT_MARK + validate_tenant(tenant)


def entry_tenant(name: str) -> str | None:
    """The tenant ``name`` is the entry of, or ``None`` when it is no tenant entry."""
    if name.startswith(TENANT_MARK) and LANE_RE.fullmatch(name[1:]):
        return name[1:]
    return None


def is_lane(name: object) -> bool:
    """Whether ``name`` is a branded lane id (a hand-edited key may hold one that is not)."""
    return isinstance(name, str) and LANE_RE.fullmatch(name) is not None


def validate_queue_name(name: object) -> str:
    """Return ``name`` if it is a safe queue name, else raise ``ValueError``."""
    if not isinstance(name, str) or not QUEUE_RE.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a queue name: use 1-64 characters from A-Z a-z 0-9 _ . -, "
            "starting with a letter or digit"
        )
    return name


def id_list(name: str, values: object) -> list[Any]:
    """``values`` (a collection of job ids or lanes) as a list; one ``str`` or
    ``bytes`` is refused (``InvalidArguments``): iterated, ``"abc"`` would name
    the jobs ``a``, ``b`` and ``c``."""
    if isinstance(values, str | bytes | bytearray | memoryview) or not isinstance(values, Iterable):
        shown = repr(values) if len(repr(values)) <= 60 else repr(values)[:57] + "..."
        raise InvalidArguments(
            f"{name} must be a collection (a list, tuple or set) of ids, "
            f"not a {type(values).__name__}: {shown}"
        )
    return list(values)


def is_job_id(name: object) -> bool:
    """Whether ``name`` is a job id (a set member that is not one names no row)."""
    return isinstance(name, str) and JOB_ID_RE.fullmatch(name) is not None


def validate_job_id(job_id: object) -> str:
    """Return ``job_id`` if it is a safe job id, else raise ``ValueError``."""
    if not isinstance(job_id, str) or not JOB_ID_RE.fullmatch(job_id):
        raise ValueError(
            f"{job_id!r} is not a job id: use 1-128 characters from A-Z a-z 0-9 _ . -, "
            "starting with a letter or digit"
        )
    return job_id


def validate_task_path(path: object) -> str:
    """Return ``path`` if it looks like a dotted import path, else raise ``ValueError``."""
    if not isinstance(path, str) or len(path) > 512 or not TASK_PATH_RE.fullmatch(path):
        raise ValueError(f"{path!r} is not a dotted task path such as 'myapp.tasks.score'")
    return path


class JobIdMinter:
    """Mints job ids in increasing order, unique across processes and machines.

    An id is ``JOB`` + 8 digits of milliseconds since the epoch + 3 digits of a
    per-millisecond sequence + 6 random digits. Within one process ids strictly
    increase (the clock is never allowed to step back); across machines they
    increase as far as the clocks agree, and the random tail keeps them unique.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = 0
        self._seq = 0

    def __call__(self) -> str:
        with self._lock:
            ms = time.time_ns() // 1_000_000
            if ms <= self._last_ms:
                ms = self._last_ms
                self._seq += 1
                if self._seq >= 62**3:  # sequence exhausted: borrow the next millisecond
                    ms += 1
                    self._seq = 0
            else:
                self._seq = 0
            self._last_ms = ms
            seq = self._seq
        tail = int.from_bytes(os.urandom(5)) % 62**6
        return JOB_BRAND + base62(ms, 8) + base62(seq, 3) + base62(tail, 6)


mint_job_id = JobIdMinter()
