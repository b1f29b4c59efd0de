"""The policy index (``emq:{q}:policies``, lua/includes/check.lua) against what
a process that does not keep it, a hand edit or a repair running beside the
writers leaves: a tenant's in-flight count still drops with its lanes'
completions, a write made while a repair rebuilds the index is kept, a field
holding a character that is no letter is read as unknown (the policies' keys
are asked), and a repair of a queue that holds nothing writes nothing.
(The audit and repair of each kind of damage: tests/test_doctor.py.)
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from django_emq.engine import doctor_calls
from django_emq.engine.calls import Call
from django_emq.engine.doctor import Doctor
from django_emq.engine.doctor_registry import RegistryDoctor
from django_emq.engine.ids import lane_id
from django_emq.engine.keys import QueueKeys
from django_emq.engine.queue import Queue

from .invariants import check_invariants, text

TASK = "tests.tasks.noop"
A, B, C = (lane_id("USR", n) for n in range(1, 4))
TENANT = lane_id("ORG", 7)


def index(r: redis.Redis, queue: Queue) -> dict[str, str]:
    return {text(f): text(v) for f, v in r.hgetall(queue.keys.policies).items()}


def claimed(queue: Queue, claims: int = 8) -> list[Any]:
    """Up to ``claims`` claims' jobs, held (not completed)."""
    held: list[Any] = []
    for _ in range(claims):
        held += queue.claim(60_000, worker_id="w:1") or []
    return held


@pytest.mark.parametrize("star", ["kept", "without t"])
def test_a_lane_whose_index_names_no_tenant_is_counted_down_by_its_completions(
    r: redis.Redis, queue: Queue, star: str
) -> None:
    """A lane given a tenant by a process that keeps no index (an older release
    during a rolling deploy: here, its field deleted by hand) is served through
    its tenant's entry and counted into the tenant's jobs in flight; the claim
    gives it its letter back, so its completions count the tenant down and the
    tenant is served again (before, its count only grew: it starved)."""
    queue.set_limit(C, 5)  # another lane's policy: the index is in force
    queue.set_tenant_limit(TENANT, 2)
    queue.enqueue_many([{"lane": A, "task_path": TASK, "tenant": TENANT} for _ in range(6)])
    r.hdel(queue.keys.policies, A)
    if star == "without t":
        r.hset(queue.keys.policies, "*", "c")
    for _ in range(3):
        held = claimed(queue)
        assert [c.lane for c in held] == [A, A]  # the tenant's ceiling
        for c in held:
            queue.complete(c.job_id, c.token)
        assert r.hget(queue.keys.inflight, "@" + TENANT) in (None, b"0")
    assert index(r, queue)[A] == "t"
    assert "t" in index(r, queue)["*"]
    assert Doctor(queue).audit().clean
    check_invariants(queue)


def test_a_lane_setting_written_while_a_repair_rebuilds_the_index_is_kept(
    r: redis.Redis, queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The repair of a queue without the index mends the lanes' fields batch by
    batch and ``*`` last; a ceiling set in between, on a lane already past,
    writes its field although ``*`` is not there yet, so it applies once the
    index is in force (before, it was lost and ignored until the next repair)."""
    queue.set_weight(A, 2)
    r.delete(queue.keys.policies)  # as an older release left the queue
    queue.enqueue_many([{"lane": B, "task_path": TASK} for _ in range(6)])
    mend = doctor_calls.mend_index

    def mend_then_write(keys: QueueKeys, names: list[str]) -> Call:
        if names == ["*"]:  # another process, between the lanes' batches and '*'
            queue.set_limit(B, 1)
        return mend(keys, names)

    monkeypatch.setattr(doctor_calls, "mend_index", mend_then_write)
    _, after = Doctor(queue).repair()
    assert after.clean, after.findings
    assert index(r, queue) == {"*": "wc", A: "w", B: "c"}
    assert [c.lane for c in claimed(queue)] == [B]  # its ceiling of 1
    check_invariants(queue)


@pytest.mark.parametrize(("field", "value"), [("*", "zzz"), ("*", "cz"), (A, "q")], ids=repr)
def test_a_field_of_the_index_that_is_no_letter_is_read_as_unknown(
    r: redis.Redis, queue: Queue, field: str, value: str
) -> None:
    """A hand-edited ``*`` or lane field holding a character that is no
    policy's letter switches nothing off: the policies are looked up as for a
    queue without the index (A's ceiling of 1 holds); the doctor reports it
    and the repair writes what the hashes say."""
    queue.set_limit(A, 1)
    queue.enqueue_many([{"lane": lane, "task_path": TASK} for lane in (A, B) for _ in range(6)])
    r.hset(queue.keys.policies, field, value)
    assert sum(1 for c in claimed(queue) if c.lane == A) == 1
    assert "policy-index" in {f.what for f in Doctor(queue).audit().findings}
    _, after = Doctor(queue).repair()
    assert after.clean, after.findings
    assert index(r, queue) == {"*": "c", A: "c"}
    check_invariants(queue)


def test_a_write_rebuilds_a_lane_field_that_is_no_letter_from_the_hashes(
    r: redis.Redis, queue: Queue
) -> None:
    """A setting written for a lane whose field holds garbage rewrites the
    whole field from the policy hashes, not only its own letter."""
    queue.set_limit(A, 1)
    r.hset(queue.keys.policies, A, "q")
    queue.set_weight(A, 2)
    assert index(r, queue) == {"*": "wc", A: "wc"}
    assert Doctor(queue).audit().clean


def test_a_repair_of_a_queue_that_holds_nothing_writes_nothing(r: redis.Redis) -> None:
    """No index key for a queue with no key (a name no one uses, or a queue
    registered by an enqueue that was refused): the registry's doctor still
    reports the name as holding nothing."""
    r.sadd("emq:queues", "ghost")

    def registry() -> RegistryDoctor:
        return RegistryDoctor(r, "emq:queues", lambda name: (Queue(name, connection=r),))

    assert [f.what for f in registry().audit().findings] == ["registry-empty"]
    for name in ("ghost", "typo"):
        _, after = Doctor(Queue(name, connection=r)).repair()
        assert after.clean
    assert r.keys("emq:{*") == []
    assert [f.what for f in registry().audit().findings] == ["registry-empty"]
