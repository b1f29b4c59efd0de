"""Tenant lanes: two levels of fairness (``docs/tenants.md``).

A lane may belong to a tenant (recorded by the enqueue that names it, see
``lua/includes/tenants.lua``). Workers rotate across tenants first, then
across the lanes of the chosen tenant: a tenant with a thousand busy lanes
gets the same share as a tenant with one. A tenant carries a weight (jobs
per turn of the top ring) and a ceiling (its lanes' jobs in flight together)
beside each lane's own.

Written once for a plain ``Queue`` and a ``ShardedQueue``: a tenant's lanes
may live on every shard, so its settings are written to each (each shard
rotates its own tenants). The doctor's part for tenants (each tenant's ring,
its entry on the top ring and its in-flight count) is :data:`DOCTOR`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .. import calls, doctor_calls, ops
from ..home import Home
from ..ids import entry_tenant, is_lane, tenant_entry, validate_lane, validate_tenant
from ..keys import QueueKeys
from ..payload import text
from ..records import MAX_CEILING, MAX_WEIGHT, as_int, positive_int
from .base import DoctorStep, KeyFamily, Policy, Report, Routed, Run

#: How many lanes one ``tenants()`` read looks at, at most (it scans the
#: lane -> tenant hash: an operator's read, never a hot path's).
SCAN_LIMIT = 100_000


def tenant_arg(tenant: str | None, fairness: str) -> str:
    """The enqueue script's tenant argument ('' keeps the lane's), validated.

    A time-fair queue refuses tenants (``ValueError``, nothing written): its
    share is kept per lane in worker time, and the two levels of tenants are
    not measured in it (see docs/time-fair.md).
    """
    if tenant is None:
        return ""
    if fairness == "time":
        raise ValueError(
            f"tenant {tenant!r}: a time-fair queue (FAIRNESS 'time') has no tenant lanes"
        )
    return validate_tenant(tenant)


@dataclass(frozen=True, slots=True)
class TenantInfo:
    """One tenant as the operator's reads see it (summed over the shards)."""

    tenant: str
    #: Lanes recorded under the tenant (of the lanes scanned).
    lanes: int
    #: Lanes on the tenant's ring now (serviceable).
    serving: int
    inflight: int
    weight: int
    ceiling: int | None
    #: Whether the tenant's entry is on the top ring (it can be served now).
    on_ring: bool


# -- the doctor's part (engine/doctor.py runs it through DOCTOR) ---------------


def _tenant_lanes(r: Any, keys: QueueKeys, batch: int) -> dict[str, list[str]]:
    """Tenant -> its recorded lanes (valid ids only), and every tenant that has
    a ring key, with the lanes it has none."""
    found: dict[str, list[str]] = {}
    for lane, tenant in r.hscan_iter(keys.tenants, count=batch):
        name, owner = text(lane), text(tenant)
        if is_lane(name) and is_lane(owner):
            found.setdefault(owner, []).append(name)
    start = len(keys.prefix) + 2
    pattern = "".join("\\" + c if c in "*?[]\\" else c for c in keys.prefix) + "t:*:ring"
    for raw in r.scan_iter(match=pattern, count=batch):
        owner = text(raw)[start : -len(":ring")]
        if is_lane(owner):
            found.setdefault(owner, [])
    return found


def _tenant_rings(r: Any, keys: QueueKeys, batch: int) -> list[str]:
    """Every tenant ring key of the queue (for a rebuild of the ring)."""
    pattern = "".join("\\" + c if c in "*?[]\\" else c for c in keys.prefix) + "t:*:ring"
    return [text(raw) for raw in r.scan_iter(match=pattern, count=batch)]


def _audit_tenants(
    run: Callable[[calls.Call], Any],
    keys: QueueKeys,
    found: dict[str, list[str]],
    report: Callable[[str, str, str], None],
    repair: bool,
) -> int:
    """Audit each tenant (and mend the broken ones in a repair); returns how many
    were mended."""
    mended = 0
    for tenant, lanes in sorted(found.items()):
        reply = run(doctor_calls.audit_tenants(keys, tenant, lanes))
        for i in range(0, len(reply), 3):
            name, what, detail = (text(x) for x in reply[i : i + 3])
            report(what, name, detail)
        if repair and reply:
            mended += int(run(doctor_calls.mend_tenants(keys, tenant, lanes)))
    return mended


def _split_entries(names: Iterable[str]) -> tuple[list[str], list[str]]:
    """Names read from the lanes' keys: (lanes and non-lanes, tenants whose entry it is)."""
    others: list[str] = []
    tenants: list[str] = []
    for name in names:
        tenant = entry_tenant(name)
        if tenant is None:
            others.append(name)
        else:
            tenants.append(tenant)
    return others, tenants


def _audit(
    r: Any, keys: QueueKeys, batch: int, run: Run, entries: set[str], report: Report, repair: bool
) -> int:
    """Every tenant with a recorded lane or a ring key, and those whose entry
    the lanes' keys hold: audited (and mended in a repair)."""
    found = _tenant_lanes(r, keys, batch)
    for tenant in entries:
        found.setdefault(tenant, [])
    return _audit_tenants(run, keys, found, report, repair)


DOCTOR = DoctorStep(entries=_split_entries, audit=_audit, rings=_tenant_rings)

POLICY = Policy(
    name="tenants",
    doc="tenants.md",
    lua=(
        "includes/tenants.lua",
        "set_tenant_limit-5.lua",
        "audit_tenants-4.lua",
        "mend_tenants-6.lua",
    ),
    keys={"tenants": "hash", "tenant_turns": "hash"},
    families=(KeyFamily("t:", ":ring", is_lane, "list"),),
    probe={"tenants": "t"},
    per_lane=("tenants",),
    settings=("TENANT",),
    doctor=DOCTOR,
)


class Calls(Routed):
    """Tenant weights, ceilings and reads, for ``Queue`` and ``ShardedQueue``."""

    def set_tenant_weight(self, tenant: str, weight: int) -> None:
        """Serve up to ``weight`` of the tenant's jobs per turn of the top ring
        (1 is the default); its lanes share them by their own weights."""
        entry = tenant_entry(tenant)
        positive_int("weight", weight, MAX_WEIGHT)
        for shard in self.shards:
            shard.runner.run(ops.set_weight(shard, entry, weight))

    def set_tenant_limit(self, tenant: str, ceiling: int | None) -> None:
        """At most ``ceiling`` jobs of the tenant's lanes in flight together, per
        shard (``None`` removes it). A tenant at its ceiling leaves the top
        ring and comes back when one of its jobs finishes."""
        validate_tenant(tenant)
        if ceiling is not None:
            positive_int("ceiling", ceiling, MAX_CEILING)
        for shard in self.shards:
            shard.runner.run(ops.set_tenant_limit(shard, tenant, ceiling))

    def tenant_of(self, lane: str) -> str | None:
        """The lane's recorded tenant, or ``None``."""
        home = self.shard_for_lane(validate_lane(lane))
        raw = home.connection.hget(home.keys.tenants, lane)
        return None if raw is None else text(raw)

    def tenant_lanes(self, tenant: str, limit: int = 1000) -> list[str]:
        """Up to ``limit`` lanes recorded under ``tenant`` (a scan of the lane ->
        tenant hash, stopped after ``SCAN_LIMIT`` lanes: an operator's read)."""
        validate_tenant(tenant)
        found: list[str] = []
        for shard in self.shards:
            for lane, owner in _scan(shard):
                if owner == tenant:
                    found.append(lane)
                    if len(found) >= limit:
                        return sorted(found)
        return sorted(found)

    def tenants(self) -> list[TenantInfo]:
        """Every tenant with a recorded lane (of the first ``SCAN_LIMIT`` lanes
        of each shard), by name; each shard's settings and counts summed."""
        counts: dict[str, int] = {}
        for shard in self.shards:
            for _, owner in _scan(shard):
                counts[owner] = counts.get(owner, 0) + 1
        return [_tenant_info(self.shards, name, n) for name, n in sorted(counts.items())]

    def tenant(self, tenant: str) -> TenantInfo:
        """One tenant's settings and counts (its lanes not counted: 0)."""
        return _tenant_info(self.shards, validate_tenant(tenant), 0)


def _tenant_info(shards: tuple[Home, ...], tenant: str, lanes: int) -> TenantInfo:
    """One tenant's settings and counts, summed over ``shards``."""
    entry = tenant_entry(tenant)
    serving = inflight = 0
    weight, ceiling, on_ring = 1, None, False
    for shard in shards:
        k = shard.keys
        pipe = shard.connection.pipeline(transaction=False)
        pipe.llen(k.tenant_ring(tenant))
        pipe.hget(k.inflight, entry)
        pipe.hget(k.weights, entry)
        pipe.hget(k.ceilings, entry)
        pipe.sismember(k.on_ring, entry)
        length, count, w, c, member = pipe.execute()
        serving += int(length)
        inflight += as_int(count)
        weight = as_int(w, 1)
        ceiling = None if c is None else int(c)
        on_ring = on_ring or bool(member)
    return TenantInfo(tenant, lanes, serving, inflight, weight, ceiling, on_ring)


def _scan(shard: Home) -> list[tuple[str, str]]:
    """(lane, tenant) pairs of the shard's lane -> tenant hash, at most SCAN_LIMIT."""
    pairs: list[tuple[str, str]] = []
    for lane, owner in shard.connection.hscan_iter(shard.keys.tenants, count=1000):
        pairs.append((text(lane), text(owner)))
        if len(pairs) >= SCAN_LIMIT:
            break
    return pairs


__all__ = ["DOCTOR", "POLICY", "SCAN_LIMIT", "Calls", "TenantInfo", "entry_tenant"]
