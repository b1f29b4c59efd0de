"""Argument building for the keyspace doctor's scripts (``django_emq.engine.doctor``
and the tenants policy's doctor step): its audits, which only read, and its
mends. Built as :mod:`.calls` builds the hot path's, run by the same runners;
kept apart because only the doctor sends them.
"""

from __future__ import annotations

from collections.abc import Sequence

from .calls import Call
from .keys import QueueKeys


def audit_jobs(k: QueueKeys, job_ids: Sequence[str]) -> Call:
    return Call("audit_jobs", [k.active, k.schedule, k.dead], [k.prefix, *job_ids])


def audit_members(k: QueueKeys, key: str, state: str, lane: str, ids: Sequence[str]) -> Call:
    return Call("audit_members", [key], [k.prefix, state, lane, *ids])


def audit_lanes(k: QueueKeys, lanes: Sequence[str]) -> Call:
    keys = [k.on_ring, k.paused, k.ceilings, k.inflight, k.depths]
    return Call("audit_lanes", keys, [k.prefix, *lanes])


def audit_ring(k: QueueKeys, limit: int) -> Call:
    return Call("audit_ring", [k.ring, k.on_ring, k.depths, k.stats], [limit])


def mend_jobs(k: QueueKeys, found: Sequence[tuple[str, str, str]]) -> Call:
    """Put each ``(job_id, set it was found in or '', that set's lane or '')`` right."""
    return Call("mend_jobs", k.job_sets, [k.prefix, *(part for entry in found for part in entry)])


def mend_lanes(k: QueueKeys, names: Sequence[tuple[str, str]]) -> Call:
    """Recount each ``(name, 'lane' | 'purge')``, or purge a name that is no lane."""
    keys = [k.ring, k.on_ring, k.paused, k.ceilings, k.inflight, k.depths, k.wake, k.weights]
    return Call("mend_lanes", keys, [k.prefix, *(part for entry in names for part in entry)])


def mend_ring(k: QueueKeys, ring: bool, total: bool, tenant_rings: Sequence[str] = ()) -> Call:
    """``tenant_rings``: the tenants' ring keys, emptied with the ring."""
    keys = [k.ring, k.on_ring, k.depths, k.stats, k.wake]
    args: list[str | int | bytes] = ["1" if ring else "0", "1" if total else "0", *tenant_rings]
    return Call("mend_ring", keys, args)


def mend_key(key: str, kind: str) -> Call:
    return Call("mend_key", [key], [kind])


def audit_tenants(k: QueueKeys, tenant: str, lanes: Sequence[str]) -> Call:
    keys = [k.on_ring, k.ceilings, k.inflight, k.tenants]
    return Call("audit_tenants", keys, [k.prefix, tenant, *lanes])


def mend_tenants(k: QueueKeys, tenant: str, lanes: Sequence[str]) -> Call:
    keys = [k.ring, k.on_ring, k.paused, k.ceilings, k.inflight, k.wake]
    return Call("mend_tenants", keys, [k.prefix, tenant, *lanes])


def audit_index(k: QueueKeys, names: Sequence[str]) -> Call:
    """The policy index's fields of ``names`` (lanes, ``@<tenant>``, ``*``)."""
    return Call("audit_index", [k.policies], [k.prefix, *names])


def mend_index(k: QueueKeys, names: Sequence[str]) -> Call:
    return Call("mend_index", [k.policies], [k.prefix, *names])
