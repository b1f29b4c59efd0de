"""A job id claimed again while its last attempt still settles in the worker.

A retry with no back-off can come back to the same worker (a claim's answer
handled before the retry's): the worker then holds the new attempt under the
job id while the old one's failure is being recorded. Found in the Redis 7
cell of the matrix (1 run in 20 of ``test_acl``'s full cycle): the old
attempt's end dropped the new one from ``held``, so the new attempt ran
unrecorded, its lease was never extended (it expired and the job ran a third
time), and a stopping worker waited its whole grace for it.

The race is staged here in order, on the worker's real core with real claims
on the session's server, so it does not hang on timing.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
from django.tasks import task_backends

from django_emq import lane_id
from django_emq.backend import FairLanesBackend
from django_emq.worker import WorkerOptions
from django_emq.worker.core import Core
from django_emq.worker.execute import finish
from django_emq.worker.jobs import Job
from django_emq.worker.shard import Shard
from tests import chaos_tasks
from tests.worker_parts import worker_parts


def claim_as_job(core: Core, shard: Shard) -> Job:
    """One claim of the worker's queue, held by ``core`` as ``Core.register``
    holds it (not dispatched: the test plays the job's part itself)."""
    claims = shard.queue.claim(60_000, worker_id=core.plan.worker_id)
    assert claims is not None
    assert len(claims) == 1
    job = Job(shard, claims[0], time.monotonic() + 60)
    core.held[job.job_id] = job
    core.executing += 1
    return job


@pytest.mark.django_db  # settling closes stale database connections, as around jobs
def test_an_old_attempt_ending_keeps_the_new_attempt_held(emq: redis.Redis) -> None:
    backend = task_backends["default"]
    assert isinstance(backend, FairLanesBackend)
    engine = backend.queue("default")
    enqueued = engine.enqueue(lane_id("USR", 1), chaos_tasks.tick.module_path, ["x"])

    async def stage() -> tuple[bool, Core, Job, Job]:
        core, _, shard = worker_parts(backend, WorkerOptions(beat=0.5))
        core.threads.start(asyncio.get_running_loop())
        try:
            first = claim_as_job(core, shard)
            # the first attempt fails and is retried at once, on the server...
            engine.retry(first.job_id, first.claim.token, "boom", 0)
            # ...and claimed again by this worker before it handles that answer
            second = claim_as_job(core, shard)
            assert second is not first
            assert second.job_id == first.job_id
            core._stopped_executing(first)  # what recording the failure does, then:
            core.ended(first, "retry", "boom")
            still_held = core.held.get(second.job_id) is second
            # the new attempt runs; its success is recorded, not dropped
            core._ran(second, finish("x:1", second.claim.token, core.policy))
            give_up = time.monotonic() + 10  # a safety limit, not a timing assertion
            while not second.settled and time.monotonic() < give_up:
                await core.outcomes.flush_all()
                await asyncio.sleep(0.01)
            core.ended(first, "retry", "boom")  # the old one ends only once
            return still_held, core, first, second
        finally:
            core.threads.stop()
            await shard.client.aclose()

    still_held, core, first, second = asyncio.run(stage())
    assert still_held, "the old attempt's end dropped the new attempt from held"
    assert first.over
    assert second.over
    assert core.held == {}
    assert core.executing == 0, "a stopping worker would wait for a job it does not run"
    assert dict(core.counts) == {"retry": 1, "done": 1}
    row = engine.job(enqueued.job_id)
    assert row is not None
    assert row["state"] == "done"
    assert row["attempts"] == "2"
