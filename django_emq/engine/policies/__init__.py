"""Lane policies, behind one extension point.

Each policy is one module of this package: a :class:`~.base.Policy` named
``POLICY`` (its keys and their types, the hashes the policy index keeps,
the keys that name lanes, its settings, its doctor step, its docs page, its
Lua) and a ``Calls`` class (its operations on a queue, written once for a
plain and a sharded queue over their public routing).

:class:`PolicyCalls` is the registry: one line per policy, its ``Calls``
class. ``Queue`` and ``ShardedQueue`` inherit the policies' calls from it
(so ``Queue.set_rate`` is ``rate.Calls.set_rate``), and :data:`POLICIES`,
read from its bases, is what the rest of the engine walks instead of naming a
policy: the key tables of :mod:`..keyspace`, the doctor's lane sources and
steps, the Lua probe list (:mod:`.probe`), and ``conf_table``'s per-queue
options. ``docs/architecture.md`` ("Adding a policy") lists the files a new
policy touches; ``tests/test_policy_registry.py`` walks the registry.
"""

from __future__ import annotations

import sys

from . import cancel, max_depth, progress, rate, schedules, tenants, timeshare, unique, weights
from .base import Policy, Routed


class PolicyCalls(
    weights.Calls,
    max_depth.Calls,
    rate.Calls,
    tenants.Calls,
    unique.Calls,
    timeshare.Calls,
    schedules.Calls,
    cancel.Calls,
    progress.Calls,
):
    """The registry of lane policies: every policy's calls, one base each."""


#: Every policy, in the registry's order (each base's module's ``POLICY``).
POLICIES: tuple[Policy, ...] = tuple(
    vars(sys.modules[base.__module__])["POLICY"]
    for base in PolicyCalls.__bases__
    if issubclass(base, Routed)
)

__all__ = ["POLICIES", "Policy", "PolicyCalls"]
