"""Tenant lanes through Django: ``enqueue_for(..., tenant=org)``, the
``tenant()`` context, ``EMQ["TENANT"]`` (an attribute name or a dotted path),
the settings check, and a real worker sharing itself by tenant first."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.contrib.auth.models import Group

from django_emq import enqueue_for, get_queue, lane_for, tenant
from django_emq.engine.ids import lane_id
from django_emq.engine.payload import text
from django_emq.engine.queue import Queue
from tests import chaos_tasks, tasks

from .factories import make_user
from .faults import RestartableServer, Workers
from .helpers import wait_for
from .invariants import check_invariants


def engine() -> Queue:
    queue = get_queue()
    assert isinstance(queue, Queue)
    return queue


@pytest.mark.django_db
def test_enqueue_for_records_the_tenant_given(emq: redis.Redis) -> None:
    user, org = make_user(), Group.objects.create(name="acme")
    enqueue_for(user, tasks.add, 1, 2, tenant=org)
    assert engine().tenant_of(lane_for(user)) == lane_for(org)
    assert lane_for(org).startswith("GRO")
    check_invariants(engine())


@pytest.mark.django_db
def test_the_tenant_context_names_the_tenant_of_plain_enqueues(emq: redis.Redis) -> None:
    from django_emq import lane

    user = make_user()
    org = lane_id("ORG", 7)
    with lane(user), tenant(org):
        tasks.add.enqueue(1, 2)
    assert engine().tenant_of(lane_for(user)) == org


@pytest.mark.django_db
def test_the_tenant_setting_derives_it_from_a_callable(emq: redis.Redis, settings: Any) -> None:
    settings.EMQ = {**settings.EMQ, "TENANT": "tests.tenancy.first_group"}
    user, org = make_user(), Group.objects.create(name="acme")
    user.groups.add(org)
    enqueue_for(user, tasks.add, 1, 2)
    assert engine().tenant_of(lane_for(user)) == lane_for(org)
    loner = make_user()
    enqueue_for(loner, tasks.add, 1, 2)  # no group: no tenant
    assert engine().tenant_of(lane_for(loner)) is None


@pytest.mark.django_db
def test_the_tenant_setting_derives_it_from_an_attribute(emq: redis.Redis, settings: Any) -> None:
    settings.EMQ = {**settings.EMQ, "TENANT": "emq_org"}
    user = make_user()
    user.emq_org = lane_id("ORG", 9)  # type: ignore[attr-defined]
    enqueue_for(user, tasks.add, 1, 2)
    assert engine().tenant_of(lane_for(user)) == lane_id("ORG", 9)


@pytest.mark.django_db
def test_a_bad_tenant_is_refused_at_the_call_site(emq: redis.Redis) -> None:
    user = make_user()
    before = emq.dbsize()
    with pytest.raises(ValueError, match="not a tenant id"):
        enqueue_for(user, tasks.add, 1, 2, tenant="acme")
    assert emq.dbsize() == before


@pytest.mark.parametrize("bad", [5, "not a path!", "1abc"])
def test_a_bad_tenant_setting_is_reported(settings: Any, bad: Any) -> None:
    from django_emq.conf import problems

    settings.EMQ = {**settings.EMQ, "TENANT": bad}
    assert any("TENANT" in p for p in problems())


# -- a real worker ------------------------------------------------------------------


@pytest.fixture
def workers(server: RestartableServer, tmp_path: Path) -> Iterator[Workers]:
    w = Workers(server.url, tmp_path)
    yield w
    w.close()


def test_a_real_worker_gives_a_lone_tenant_half_the_starts_against_a_crowd(
    server: RestartableServer, workers: Workers
) -> None:
    """Tenant T1: five users of six 50 ms jobs each; tenant T2: one user of 30."""
    client = server.client()
    queue = Queue("default", connection=client)
    crowd, lone = lane_id("ORG", 1), lane_id("ORG", 2)
    users = {lane_id("USR", 10 + i): crowd for i in range(5)} | {lane_id("USR", 1): lone}
    for lane_, owner in users.items():
        queue.enqueue_many(
            {
                "lane": lane_,
                "task_path": chaos_tasks.nap.module_path,
                "args": [f"{lane_}{i}", 0.05],
                "tenant": owner,
            }
            for i in range(30 if owner == lone else 6)
        )
    workers.start("--concurrency", "1", "--lease", "10")
    wait_for(lambda: int(client.hget(queue.keys.stats, "completed") or 0) == 60, what="all done")
    rows = [
        {text(f): text(v) for f, v in client.hgetall(k).items()}
        for k in client.scan_iter(match=queue.keys.prefix + "job:*")
    ]
    order = [
        row["group"] for row in sorted(rows, key=lambda row: (int(row["claimed"]), int(row["seq"])))
    ]
    first = order[:30]  # both tenants backlogged all along
    assert 13 <= first.count(lane_id("USR", 1)) <= 17
    check_invariants(queue)
    client.close()


# -- the admin ------------------------------------------------------------------------

LIST = "/admin/django_emq/lane/"


@pytest.fixture
def viewer(db: None) -> Any:
    from django.test import Client

    client = Client()
    client.force_login(make_user("viewer", staff=True, perms=["view_lanes"]))
    return client


@pytest.mark.django_db
def test_the_admin_shows_each_lanes_tenant_and_filters_by_tenant(
    emq: redis.Redis, viewer: Any
) -> None:
    queue = engine()
    org = lane_id("ORG", 5)
    for i in range(3):
        queue.enqueue(lane_id("USR", 50 + i), tasks.add.module_path, tenant=org)
    queue.enqueue(lane_id("USR", 60), tasks.add.module_path)
    page = viewer.get(LIST).content.decode()
    assert page.count(f">{org}</a>") == 3  # the tenant column links to the filter
    assert f"@{org}" in page  # the ring's head shows the tenant's entry
    assert "are not lane ids" not in page  # an entry is no damage
    filtered = viewer.get(LIST, {"tenant": org}).content.decode()
    assert f"Lanes of tenant {org}" in filtered
    assert filtered.count('class="emq-lane"') == 3
    listing = viewer.get(LIST, {"tenants": "1"}).content.decode()
    assert listing.count('class="emq-tenant-row"') == 1
    lane_page = viewer.get(f"{LIST}default/{lane_id('USR', 50)}/").content.decode()
    assert f'<td id="emq-tenant">{org}</td>' in lane_page


@pytest.mark.django_db
def test_the_snippet_of_docs_tenants_runs_as_written(emq: redis.Redis) -> None:
    """docs/tenants.md's "Using it" snippet, read from the page and run with only
    the names it does not import itself (a request, a task, a report)."""
    page = (Path(__file__).parent.parent / "docs" / "tenants.md").read_text()
    snippet = page.split("## Using it", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    user, org = make_user(), Group.objects.create(name="acme")
    user.organization = org  # type: ignore[attr-defined]

    class Request:
        """What the snippet reads of a request: its user."""

    request = Request()
    request.user = user  # type: ignore[attr-defined]
    report = Group.objects.create(name="report")  # any saved row: its pk is the argument
    exec(snippet, {"request": request, "build_report": tasks.record, "report": report})
    assert engine().tenant_of(lane_for(user)) == lane_for(org)
    assert engine().depth(lane_for(user)) == 2
