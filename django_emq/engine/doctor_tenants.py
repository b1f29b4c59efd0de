"""The keyspace doctor's part for tenant lanes (``lua/includes/tenants.lua``):
each tenant's ring, its entry on the top ring and its in-flight count,
audited in one atomic read per tenant and mended in one atomic step.

The tenants are found by scanning the lane -> tenant hash (``HSCAN``, in
batches) and the tenants' ring keys; a tenant's lanes are passed to its
audit, so the in-flight sum is taken atomically.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from . import calls
from .ids import entry_tenant, is_lane
from .keys import QueueKeys
from .payload import text


def tenant_lanes(r: Any, keys: QueueKeys, batch: int) -> dict[str, list[str]]:
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


def bad_records(r: Any, keys: QueueKeys, batch: int) -> list[tuple[str, str]]:
    """(lane, tenant) records of the tenants hash that name no lane or no tenant."""
    return [
        (text(lane), text(tenant))
        for lane, tenant in r.hscan_iter(keys.tenants, count=batch)
        if not (is_lane(text(lane)) and is_lane(text(tenant)))
    ]


def tenant_rings(r: Any, keys: QueueKeys, batch: int) -> list[str]:
    """Every tenant ring key of the queue (for a rebuild of the ring)."""
    pattern = "".join("\\" + c if c in "*?[]\\" else c for c in keys.prefix) + "t:*:ring"
    return [text(raw) for raw in r.scan_iter(match=pattern, count=batch)]


def audit_tenants(
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
        reply = run(calls.audit_tenants(keys, tenant, lanes))
        for i in range(0, len(reply), 3):
            name, what, detail = (text(x) for x in reply[i : i + 3])
            report(what, name, detail)
        if repair and reply:
            mended += int(run(calls.mend_tenants(keys, tenant, lanes)))
    return mended


def split_entries(names: Iterable[str]) -> tuple[list[str], list[str]]:
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
