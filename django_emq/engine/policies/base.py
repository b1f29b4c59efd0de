"""What a lane policy declares, and what its calls may use of a queue.

A policy is one module of this package holding a :class:`Policy` (what the
rest of the engine needs to know of it: its keys and their types, the
hashes the policy index keeps, the keys that name lanes, its
settings, its doctor step, its docs page and its Lua) and a ``Calls`` class
(its operations on the queue's API). The registry
(``django_emq/engine/policies/__init__.py``) lists the ``Calls`` classes,
one line each; :mod:`..keyspace`, :mod:`..doctor`, ``conf_table`` and the
Lua probe list read the policies from it, never by name.

A ``Calls`` class is written once for a plain ``Queue`` and a
``ShardedQueue``: it subclasses :class:`Routed` and reaches a queue only
through its public routing (``shards``, ``shard_for_lane``,
``shard_for_job``) and the public parts of the plain queue a call lands on
(:class:`~..home.Home`: its keys, runner and client), never private state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..calls import Call
from ..home import Home
from ..keys import QueueKeys

_NONE: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class KeyFamily:
    """Keys a policy writes one of per item (per tenant, ...): the name after the
    queue's prefix is ``<start><item><end>``, ``item`` valid by ``valid``."""

    start: str
    end: str
    valid: Callable[[str], bool]
    #: The Redis type every key of the family holds.
    kind: str

    def matches(self, rest: str) -> bool:
        """Whether ``rest`` (a key name after the queue's prefix) is one of them."""
        if not (rest.startswith(self.start) and rest.endswith(self.end)):
            return False
        item = rest[len(self.start) : len(rest) - len(self.end)]
        return bool(item) and self.valid(item)


@dataclass(frozen=True, slots=True)
class QueueOption:
    """A per-queue default a policy takes from ``EMQ``: the ``Queue`` keyword
    ``option``, read from the per-queue setting ``key`` (``"*"``: every queue
    not named), ``default`` when neither names the queue."""

    option: str
    key: str
    default: Any = None


#: What the doctor hands a policy's step: run a script (a repair deletes a key of
#: the wrong type it meets first), report a finding ``(what, subject, detail)``.
Run = Callable[[Call], Any]
Report = Callable[[str, str, str], None]


@dataclass(frozen=True, slots=True)
class DoctorStep:
    """A policy's own part of the keyspace doctor's pass (``engine/doctor.py``)."""

    #: Names read from the keys that name lanes -> (the names to audit as lanes,
    #: the policy's own entries among them, e.g. a tenant's ``@<tenant>``).
    entries: Callable[[Iterable[str]], tuple[list[str], list[str]]]
    #: Audit (in a repair: mend) the policy's own structures; gets the client,
    #: the keys, the batch size, the entries found, and answers how many it mended.
    audit: Callable[[Any, QueueKeys, int, Run, set[str], Report, bool], int]
    #: The policy's ring keys a rebuild of the ring rebuilds too.
    rings: Callable[[Any, QueueKeys, int], list[str]]


def same_name(name: str) -> str | None:
    """A member or field that is the lane's name itself."""
    return name


@dataclass(frozen=True, slots=True)
class Policy:
    """One lane policy, as the rest of the engine sees it."""

    #: Short name (the module's).
    name: str
    #: Its docs page under ``docs/`` (``page.md`` or ``page.md#heading``).
    doc: str
    #: Its Lua: files under ``engine/lua/`` (its include modules, its scripts).
    lua: tuple[str, ...] = ()
    #: Its fixed keys: ``QueueKeys`` attribute -> Redis type.
    keys: Mapping[str, str] = field(default_factory=lambda: _NONE)
    #: Its per-lane keys (``g:<lane>:<suffix>``): suffix -> Redis type.
    lane_keys: Mapping[str, str] = field(default_factory=lambda: _NONE)
    #: Its keys of other families (a tenant's ring).
    families: tuple[KeyFamily, ...] = ()
    #: Its hashes whose existence says the policy is in use, each with its
    #: letter in the policy index (``QueueKeys.policies``, ``lua/includes/
    #: policy_index.lua``): the index's ``*`` field holds the letter of each
    #: that holds a field, the hot paths' one read for every policy
    #: (``lua/includes/policies_off.lua``). ``QueueKeys`` attribute -> letter.
    probe: Mapping[str, str] = field(default_factory=lambda: _NONE)
    #: Those of its probe hashes whose fields are lanes' (or tenants' entries')
    #: own settings: a lane's field of the policy index holds their letters,
    #: so a hot path reads one field to learn which of them the lane has.
    per_lane: tuple[str, ...] = ()
    #: Its keys whose members (or fields) name lanes: ``QueueKeys`` attributes
    #: (the doctor audits each lane named).
    names_lanes: tuple[str, ...] = ()
    #: A member or field of those keys -> the lane it names, ``None`` for one
    #: that names none (a setting of the policy's own).
    lane_of: Callable[[str], str | None] = field(default_factory=lambda: same_name)
    #: The ``EMQ`` keys it reads (rows of ``conf_table.SETTINGS``).
    settings: tuple[str, ...] = ()
    #: The ``Queue`` keywords its settings fill, per queue.
    options: tuple[QueueOption, ...] = ()
    #: Its step of the doctor's pass, if it keeps structures of its own.
    doctor: DoctorStep | None = None


class Routed:
    """What a policy's calls use of a queue: its public routing. A plain queue
    is a sharded queue of one, so each call is written once."""

    shards: tuple[Home, ...]

    def shard_for_lane(self, lane: str) -> Home:
        raise NotImplementedError

    def shard_for_job(self, job_id: str) -> Home:
        raise NotImplementedError
