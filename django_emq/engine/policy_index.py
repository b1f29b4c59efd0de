"""The doctor's part for the policy index (``QueueKeys.policies``).

The index is what the hot paths read instead of the lane policies' hashes
(``lua/includes/check.lua``): its ``*`` field holds a letter for each policy
hash that holds a field, a lane's (or a tenant entry's) field the letters of
the per-lane settings it has. The letters and hashes come from the registry
(each policy's ``probe`` and ``per_lane``). Every write of a policy hash keeps
the index; this audits it against the hashes (a field that names a setting
the lane lacks, or lacks one it has; a ``*`` without the letter of a hash in
use) and, in a repair, sets each wrong field to what the hashes say, one
atomic batch at a time (``lua/audit_index-1.lua``, ``lua/mend_index-1.lua``).
A letter of ``*`` whose hash is empty is no damage (it costs a lookup, never
a wrong answer): a repair drops it without counting it. ``*`` is mended
last: a queue whose index has no ``*`` is read from the policies' keys
themselves (a queue written by a release before the index), so the index
counts only once it is whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any

from . import doctor_calls
from .calls import Call
from .keys import QueueKeys
from .payload import text
from .policies import POLICIES

#: The hashes whose fields name lanes (or tenant entries) with a setting of their own.
PER_LANE: tuple[str, ...] = tuple(attr for p in POLICIES for attr in p.per_lane)


def _names(r: Any, keys: QueueKeys, batch: int) -> Iterator[str]:
    """Every field of the index but ``*``, every field of the per-lane hashes
    (some twice: auditing a name twice is harmless)."""
    for key in (keys.policies, *(getattr(keys, attr) for attr in PER_LANE)):
        if text(r.type(key)) != "hash":
            continue  # none, or of the wrong type (reported, and deleted in a repair)
        for name, _ in r.hscan_iter(key, count=batch):
            if text(name) != "*":
                yield text(name)


def check(
    r: Any,
    keys: QueueKeys,
    batch: int,
    run: Callable[[Call], Any],
    found: Callable[[str, str, str], None],
    repair: bool,
) -> int:
    """Audit the index (in a repair: mend it); answers how many fields were mended."""
    if text(r.type(keys.policies)) not in ("hash", "none"):
        return 0  # reported with the keys (and deleted first in a repair)
    mended = 0
    names = _names(r, keys, batch)
    while chunk := list(islice(names, batch)):
        reply = run(doctor_calls.audit_index(keys, chunk))
        wrong = []
        for i in range(0, len(reply), 3):
            name, held, want = (text(x) for x in reply[i : i + 3])
            found("policy-index", name, f"holds {held!r}, the policy hashes say {want!r}")
            wrong.append(name)
        if repair and wrong:
            mended += int(run(doctor_calls.mend_index(keys, wrong)))
    # `*` last: once it is there the hot paths trust the index (before, they
    # ask the policies' keys), so a rebuilt index is complete when it counts
    reply = run(doctor_calls.audit_index(keys, ["*"]))
    if reply:
        held, want = text(reply[1]), text(reply[2])
        found("policy-index", "*", f"holds {held!r}, the policy keys say {want!r}")
    if repair:  # (a stale letter, no damage, is dropped without counting it)
        changed = int(run(doctor_calls.mend_index(keys, ["*"])))
        if reply:
            mended += changed
    return mended
