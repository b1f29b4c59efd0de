"""``QUEUES: []``: Django's "any queue name". The backend accepts any valid
queue name, each enqueue records its queue in the registry (``emq:queues``),
and ``run_emq_worker`` for that backend serves every queue in it, re-reading
the registry each beat (``tests.any_queue_settings`` is the worker's settings)."""

from __future__ import annotations

import signal
import subprocess
from typing import Any

import pytest
import redis
from django.core.checks import run_checks
from django.core.management import CommandError, call_command
from django.tasks import task_backends
from django.tasks.exceptions import InvalidTask

from django_emq import lane
from django_emq.backend import QUEUE_REGISTRY, FairLanesBackend
from django_emq.engine.ids import lane_id, mint_job_id
from django_emq.engine.placement import shard_tags
from django_emq.exceptions import CorruptKeyspace, InvalidArguments
from django_emq.jobs import cancel
from tests import tasks
from tests.any_queue_settings import ANYQ
from tests.helpers import wait_for
from tests.test_worker import processes, runs, worker_process

pytestmark = pytest.mark.django_db
__all__ = ["processes"]  # the fixture, shared with test_worker

A = lane_id("USR", 1)


def anyq(settings: Any) -> FairLanesBackend:
    """This process's ``TASKS`` as the worker's will be: backend ``anyq``."""
    settings.TASKS = {**settings.TASKS, "anyq": ANYQ}
    backend = task_backends["anyq"]
    assert isinstance(backend, FairLanesBackend)
    return backend


def registry(r: redis.Redis) -> set[str]:
    return {x.decode() for x in r.smembers(QUEUE_REGISTRY)}  # type: ignore[union-attr]


def test_an_empty_queues_list_passes_the_checks(emq: redis.Redis, settings: Any) -> None:
    anyq(settings)
    assert [m.id for m in run_checks(tags=["emq"]) if m.id in ("emq.E006", "emq.E007")] == []


def test_any_valid_queue_name_is_accepted_and_registered(emq: redis.Redis, settings: Any) -> None:
    backend = anyq(settings)
    with lane(A):
        first = tasks.add.using(backend="anyq", queue_name="never-listed").enqueue(1, 2)
        tasks.add.using(backend="anyq", queue_name="never-listed").enqueue(3, 4)
        other = tasks.add.using(backend="anyq", queue_name="another").enqueue(5, 6)
    assert registry(emq) == {"never-listed", "another"}
    assert backend.served_queues() == ["another", "never-listed"]
    assert backend.get_result(first.id) == first
    assert backend.get_result(other.id).id == other.id
    assert backend.engine("never-listed").totals().pending == 2
    assert cancel(other.id, backend="anyq") == "cancelled"  # found through the registry


def test_an_invalid_queue_name_is_refused_and_writes_nothing(
    emq: redis.Redis, settings: Any
) -> None:
    anyq(settings)
    with lane(A), pytest.raises(InvalidTask, match="queue"):
        tasks.add.using(backend="anyq", queue_name="bad name }").enqueue(1, 2)
    assert emq.dbsize() == 0


def test_a_refused_enqueue_registers_nothing(emq: redis.Redis, settings: Any) -> None:
    """Arguments over ``MAX_PAYLOAD`` are refused by the engine's check of the
    job, before the registry is written: nothing is written at all."""
    anyq(settings)
    big = "x" * 2_000_000
    with lane(A), pytest.raises(InvalidArguments):
        tasks.record.using(backend="anyq", queue_name="typo1").enqueue(big)
    assert emq.dbsize() == 0


def test_a_registry_of_the_wrong_type_is_named_by_enqueue_and_get_result(
    emq: redis.Redis, settings: Any
) -> None:
    backend = anyq(settings)
    emq.set(QUEUE_REGISTRY, "oops")
    with lane(A), pytest.raises(CorruptKeyspace, match=QUEUE_REGISTRY):
        tasks.add.using(backend="anyq", queue_name="fresh").enqueue(1, 2)
    with pytest.raises(CorruptKeyspace, match="emq_doctor"):
        backend.get_result(mint_job_id())
    assert emq.keys() == [QUEUE_REGISTRY.encode()]  # the refused enqueue wrote nothing


def test_a_sharded_queue_is_served_and_its_shards_names_are_refused(
    emq: redis.Redis, settings: Any
) -> None:
    """``EMQ['SHARDS']`` beside ``QUEUES: []``: no emq.W003 (the backend may serve
    it), and a queue named like one of its shards is refused at the call site
    (emq.E005 cannot see names that are in no setting)."""
    settings.EMQ = {**settings.EMQ, "SHARDS": {"photos": 3}}
    backend = anyq(settings)
    assert [m.id for m in run_checks(tags=["emq"]) if m.id in ("emq.W003", "emq.E005")] == []
    tag = next(t for t in shard_tags("photos", 3) if t != "photos")
    with lane(A), pytest.raises(InvalidTask, match="shard of the sharded queue 'photos'"):
        tasks.add.using(backend="anyq", queue_name=tag).enqueue(1, 2)
    assert emq.dbsize() == 0
    with lane(A):
        result = tasks.add.using(backend="anyq", queue_name="photos").enqueue(1, 2)
    assert backend.get_result(result.id) == result


def test_the_worker_serves_queues_registered_before_and_after_it_started(
    emq: redis.Redis, settings: Any, processes: list[subprocess.Popen[bytes]]
) -> None:
    """Two queue names no settings list: one enqueued before the worker starts,
    one after (picked up at a later beat, with no restart); the worker runs both."""
    anyq(settings)
    with lane(A):
        tasks.record.using(backend="anyq", queue_name="photos").enqueue("before")
    processes.append(
        worker_process("--backend", "anyq", settings_module="tests.any_queue_settings")
    )
    wait_for(lambda: "before" in runs(emq), what="the job on queue photos ran")
    with lane(A):
        tasks.record.using(backend="anyq", queue_name="mail").enqueue("after")
    wait_for(lambda: "after" in runs(emq), what="the job on queue mail ran")
    assert processes[0].poll() is None
    assert registry(emq) == {"photos", "mail"}


def failed_reads(r: redis.Redis) -> int:
    """SMEMBERS calls the server refused (``INFO commandstats`` failed_calls)."""
    stats: dict[str, dict[str, Any]] = r.info("commandstats")
    return int(stats.get("cmdstat_smembers", {}).get("failed_calls", 0))


def test_an_unreadable_registry_never_stops_the_worker(
    emq: redis.Redis, settings: Any, processes: list[subprocess.Popen[bytes]]
) -> None:
    """A registry the worker cannot read (a string where the set was) is
    logged and tried again each beat: the queues it serves are still served."""
    anyq(settings)
    with lane(A):
        tasks.record.using(backend="anyq", queue_name="photos").enqueue("first")
    processes.append(
        worker_process("--backend", "anyq", settings_module="tests.any_queue_settings")
    )
    wait_for(lambda: "first" in runs(emq), what="the first job ran")
    before = failed_reads(emq)
    emq.delete(QUEUE_REGISTRY)
    emq.set(QUEUE_REGISTRY, "not a set")
    # two beats read the registry and are refused (WRONGTYPE): the server counts
    # them as failed SMEMBERS calls (wait for the count, not for a time)
    wait_for(lambda: failed_reads(emq) >= before + 2, what="two refused reads of the registry")
    with lane(A):  # this process registered photos already: no SADD
        tasks.record.using(backend="anyq", queue_name="photos").enqueue("second")
    wait_for(lambda: "second" in runs(emq), what="the second job ran")
    worker = processes[0]
    assert worker.poll() is None
    worker.send_signal(signal.SIGTERM)
    out = worker.communicate(timeout=30)[0].decode()
    assert "cannot read the queue registry" in out
    assert "unexpected error" not in out  # a warning, not a glitch of the beat


def test_a_registry_that_is_not_a_set_is_a_command_error_at_start(
    emq: redis.Redis, settings: Any
) -> None:
    anyq(settings)
    emq.set(QUEUE_REGISTRY, "not a set")
    with pytest.raises(
        CommandError, match="cannot read the queue registry: emq:queues is not a set"
    ):
        call_command("run_emq_worker", "--backend", "anyq", "--burst", verbosity=0)


def test_a_schedule_on_a_queue_no_backend_lists_fires_on_the_any_queue_worker(
    emq: redis.Redis, settings: Any
) -> None:
    """A schedule's queue that no backend lists is served by a ``QUEUES: []``
    backend's worker from the start, before any enqueue registers it (the
    worker ticks the schedules of the queues it serves): its tick is enqueued
    and run. A queue another backend lists stays that backend's."""
    backend = anyq(settings)
    settings.EMQ = {**settings.EMQ, "SCHEDULES": {
        "unlisted": {"task": "tests.tasks.record", "cron": "* * * * * *", "lane": A,
                     "queue": "scheduled-only", "args": ["ticked"]},
        "listed": {"task": "tests.tasks.record", "cron": "* * * * * *", "lane": A,
                   "queue": "other", "args": ["not here"]},
    }}  # fmt: skip
    assert "scheduled-only" not in registry(emq)
    assert backend.served_queues() == ["scheduled-only"]
    assert [m for m in run_checks() if str(m.id).startswith("emq.E")] == []
    call_command("run_emq_worker", "--backend", "anyq", "--burst", verbosity=0)
    ran = runs(emq)  # a later beat of the run may enqueue the next second's tick too
    assert ran
    assert set(ran) == {"ticked"}


def test_a_registry_of_the_wrong_type_makes_the_metrics_answer_503_naming_it(
    emq: redis.Redis, settings: Any, admin_client: Any
) -> None:
    """The scrape fails visibly (503, the key named) instead of a server error."""
    anyq(settings)
    emq.set(QUEUE_REGISTRY, "oops")
    metrics = admin_client.get("/emq/metrics")
    assert metrics.status_code == 503
    assert QUEUE_REGISTRY in metrics.content.decode()
    stats = admin_client.get("/emq/stats")
    assert stats.status_code == 503
    assert QUEUE_REGISTRY in stats.json()["error"]


def test_the_worker_banner_names_what_it_serves(emq: redis.Redis, settings: Any) -> None:
    """With ``QUEUES: []`` and nothing registered yet it says it serves every
    queue enqueued to (none yet); a queue given twice is served, and named, once."""
    anyq(settings)
    banners = []
    for args, module in (
        (("--backend", "anyq"), "tests.any_queue_settings"),
        (("--queue", "default", "--queue", "default"), "tests.settings"),
    ):
        worker = worker_process(*args, "--burst", settings_module=module)
        out, _ = worker.communicate(timeout=60)
        assert worker.returncode == 0, out
        (banner,) = [line for line in out.decode().splitlines() if ", concurrency " in line]
        banners.append(banner.split(" on ", 1)[1].split(", concurrency ")[0])
    assert banners == ["every queue enqueued to (none yet)", "default"]
