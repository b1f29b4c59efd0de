"""Where the shards of a sharded queue live, which shard a lane rides, and how a
job id names its shard. Pure functions: no server is asked anything.

A queue ``q`` declared with ``S`` shards is ``S`` ordinary queues whose keys
carry their own hash tag, ``emq:{<tag>}:...``. Shard ``k``'s tag is ``q.k``
when that lands in a cluster slot range no earlier shard took, else
``q.k-<n>`` for the first ``n`` that does: the slot space is cut into ``S``
equal ranges and each shard takes a range of its own. On a cluster whose
primaries split the slots evenly (what ``valkey-cli --cluster create`` does),
``S`` equal to the number of primaries puts every shard on its own primary.

A lane rides shard ``crc32(lane) % S`` (stable across processes, machines
and Python versions). A job id of a sharded queue ends with ``.s<k>``, so
every call that names a job finds its shard without asking the server.
"""

from __future__ import annotations

import functools
import re
import zlib

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from .ids import validate_job_id, validate_lane, validate_queue_name

#: Most shards one queue may have.
MAX_SHARDS = 64
#: A sharded queue's job ids end with this marker and the shard number.
JOB_SUFFIX = ".s"

_SUFFIX_RE = re.compile(r"\.s(0|[1-9][0-9]?)\Z")


def slot_of(tag: str) -> int:
    """The cluster slot of every key ``emq:{<tag>}:...``."""
    return key_slot(tag.encode())


def slot_range(tag: str, count: int) -> int:
    """Which of ``count`` equal ranges of the slot space ``tag``'s slot falls in."""
    return slot_of(tag) * count // REDIS_CLUSTER_HASH_SLOTS


@functools.cache
def shard_tags(name: str, count: int) -> tuple[str, ...]:
    """The hash tags of queue ``name``'s ``count`` shards, each in its own slot range.

    ``ValueError`` when ``name`` or a tag is not a valid queue name (too long).
    """
    validate_queue_name(name)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SHARDS:
        raise ValueError(f"a queue has 1 to {MAX_SHARDS} shards, not {count!r}")
    taken: set[int] = set()
    tags = []
    for k in range(count):
        salt = 0
        while True:
            tag = f"{name}.{k}" if salt == 0 else f"{name}.{k}-{salt}"
            where = slot_range(tag, count)
            if where not in taken:
                break
            salt += 1
        taken.add(where)
        tags.append(validate_queue_name(tag))
    return tuple(tags)


def lane_shard(lane: str, count: int) -> int:
    """The shard (0 to ``count - 1``) lane ``lane`` rides."""
    return zlib.crc32(validate_lane(lane).encode()) % count


def job_id_on(job_id: str, shard: int) -> str:
    """``job_id`` marked as a job of shard ``shard``: ``<job_id>.s<shard>``
    (unchanged when it carries that mark already, so marking is idempotent)."""
    suffix = f"{JOB_SUFFIX}{shard}"
    marked = job_id if validate_job_id(job_id).endswith(suffix) else job_id + suffix
    return validate_job_id(marked)


def job_shard(job_id: str, count: int) -> int | None:
    """The shard a marked job id names, or ``None`` if it names none of ``count``."""
    match = _SUFFIX_RE.search(validate_job_id(job_id))
    if match is None:
        return None
    shard = int(match.group(1))
    return shard if shard < count else None
