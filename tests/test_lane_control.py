"""Lane control: ceilings, pause and resume, weights' validation, drain and move."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from django_emq.engine.queue import Queue
from django_emq.exceptions import InvalidJobState, JobNotFound

from .helpers import (
    LONG_LEASE,
    TASK,
    active,
    claim_one,
    claim_turn,
    dump,
    fill,
    lane,
    new_client,
    on_ring,
    pending,
    ring,
    wait_until,
)

# -- ceilings --------------------------------------------------------------


def test_ceiling_is_never_exceeded_by_concurrent_claimers(r: redis.Redis) -> None:
    ceilings = {lane(1): 2, lane(2): 3, lane(3): None}
    setup = Queue("q", connection=r)
    for name, ceiling in ceilings.items():
        fill(setup, name, 60)
        setup.set_limit(name, ceiling)
    total = 60 * len(ceilings)

    lock = threading.Lock()
    held: Counter[str] = Counter()  # claimed and not yet (being) completed, per lane
    peak: Counter[str] = Counter()
    violations: list[str] = []
    completed: list[str] = []
    errors: list[BaseException] = []

    def work() -> None:
        client = new_client(r)
        q = Queue("q", connection=client)
        try:
            while True:
                with lock:
                    if len(completed) == total:
                        return
                claims = q.claim(LONG_LEASE)
                if claims is None:
                    continue
                for c in claims:
                    ceiling = ceilings[c.lane]
                    with lock:
                        held[c.lane] += 1
                        peak[c.lane] = max(peak[c.lane], held[c.lane])
                        if ceiling is not None and held[c.lane] > ceiling:
                            violations.append(f"{c.lane}: {held[c.lane]} held > {ceiling}")
                    inflight = q.lane(c.lane).inflight
                    if ceiling is not None and inflight > ceiling:
                        with lock:
                            violations.append(f"{c.lane}: inflight {inflight} > {ceiling}")
                for c in claims:
                    # Counted down before the server's count drops, so the local
                    # count never runs ahead of the server's.
                    with lock:
                        held[c.lane] -= 1
                    q.complete(c.job_id, c.token)
                    with lock:
                        completed.append(c.job_id)
        except BaseException as exc:  # pragma: no cover - reported below
            with lock:
                errors.append(exc)
                completed.extend(["x"] * total)
        finally:
            client.close()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert violations == []
    assert len(set(completed)) == total
    assert peak[lane(1)] <= 2
    assert peak[lane(2)] <= 3
    assert setup.totals().active == 0
    assert r.hgetall(setup.keys.inflight) == {}


def test_lane_at_its_ceiling_leaves_the_ring(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 10)
    fill(queue, lane(2), 10)
    queue.set_limit(lane(1), 2)
    served = [claim_one(queue).lane for _ in range(6)]
    assert served == [lane(1), lane(2), lane(1), lane(2), lane(2), lane(2)]
    assert ring(r, queue) == [lane(2)]
    info = queue.lane(lane(1))
    assert (info.inflight, info.ceiling, info.depth) == (2, 2, 8)


def test_completing_a_job_brings_a_lane_at_its_ceiling_back(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 5)
    queue.set_limit(lane(1), 1)
    first = claim_one(queue)
    assert ring(r, queue) == []
    assert queue.claim(LONG_LEASE) is None
    queue.complete(first.job_id, first.token)
    assert ring(r, queue) == [lane(1)]
    assert claim_one(queue).args == [1]


def test_a_failed_job_frees_its_lanes_ceiling_headroom(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 5)
    queue.set_limit(lane(1), 1)
    first = claim_one(queue)
    queue.fail(first.job_id, first.token, "boom")
    assert ring(r, queue) == [lane(1)]


def test_removing_the_ceiling_puts_the_lane_back_on_the_ring(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 5)
    queue.set_limit(lane(1), 1)
    claim_one(queue)
    assert ring(r, queue) == []
    queue.set_limit(lane(1), None)
    assert ring(r, queue) == [lane(1)]
    assert queue.lane(lane(1)).ceiling is None
    assert r.hexists(queue.keys.ceilings, lane(1)) == 0
    assert len(queue.claim(LONG_LEASE, turns=10) or []) == 4


def test_raising_the_ceiling_puts_the_lane_back_on_the_ring(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 5)
    queue.set_limit(lane(1), 1)
    claim_one(queue)
    queue.set_limit(lane(1), 2)
    assert ring(r, queue) == [lane(1)]
    claim_one(queue)
    assert ring(r, queue) == []


def test_lowering_the_ceiling_to_the_in_flight_count_takes_the_lane_off_the_ring(
    r: redis.Redis, queue: Queue
) -> None:
    fill(queue, lane(1), 5)
    fill(queue, lane(2), 5)
    claim_one(queue)
    claim_one(queue)
    assert ring(r, queue) == [lane(1), lane(2)]
    queue.set_limit(lane(1), 1)
    assert ring(r, queue) == [lane(2)]
    assert on_ring(r, queue) == {lane(2)}
    assert queue.lane(lane(1)).inflight == 1


@pytest.mark.parametrize("ceiling", [0, -1, 1.5, True, "2"])
def test_bad_ceiling_is_refused_and_changes_nothing(
    r: redis.Redis, queue: Queue, ceiling: Any
) -> None:
    fill(queue, lane(1), 3)
    queue.set_limit(lane(1), 2)
    before = dump(r)
    with pytest.raises(ValueError, match="ceiling"):
        queue.set_limit(lane(1), ceiling)
    assert dump(r) == before


# -- weights -----------------------------------------------------------------


@pytest.mark.parametrize("weight", [0, -1, 1001, 1.5, True, None, "3"])
def test_bad_weight_is_refused_and_changes_nothing(
    r: redis.Redis, queue: Queue, weight: Any
) -> None:
    fill(queue, lane(1), 3)
    queue.set_weight(lane(1), 2)
    before = dump(r)
    with pytest.raises(ValueError, match="weight"):
        queue.set_weight(lane(1), weight)
    assert dump(r) == before
    assert queue.lane(lane(1)).weight == 2


def test_largest_weight_is_accepted(queue: Queue) -> None:
    queue.set_weight(lane(1), 1000)
    assert queue.lane(lane(1)).weight == 1000


@pytest.mark.parametrize("bad", [None, "", "usr0000000001a", "USR}x", "USR:1", "USR0000000000*"])
def test_lane_control_refuses_bad_lane_names_and_writes_nothing(
    r: redis.Redis, queue: Queue, bad: Any
) -> None:
    for call in (
        lambda: queue.pause(bad),
        lambda: queue.resume(bad),
        lambda: queue.set_limit(bad, 3),
        lambda: queue.set_weight(bad, 3),
        lambda: queue.drain(bad),
        lambda: queue.lane(bad),
    ):
        with pytest.raises(ValueError, match="lane id"):
            call()
    assert r.dbsize() == 0


# -- pause and resume ------------------------------------------------------------


def test_paused_lane_leaves_the_ring(r: redis.Redis, queue: Queue) -> None:
    for i in (1, 2, 3):
        fill(queue, lane(i), 3)
    assert queue.pause(lane(2)) is True
    assert ring(r, queue) == [lane(1), lane(3)]
    assert on_ring(r, queue) == {lane(1), lane(3)}
    assert queue.lane(lane(2)).paused is True


def test_paused_lane_is_not_served(queue: Queue) -> None:
    fill(queue, lane(1), 3)
    fill(queue, lane(2), 3)
    queue.pause(lane(1))
    claims = queue.claim(LONG_LEASE, turns=10)
    assert claims is not None
    assert {c.lane for c in claims} == {lane(2)}
    assert queue.claim(LONG_LEASE) is None


def test_pause_leaves_backlog_and_in_flight_untouched(r: redis.Redis, queue: Queue) -> None:
    ids = fill(queue, lane(1), 5)
    queue.set_weight(lane(1), 2)
    claimed = claim_turn(queue)
    backlog = pending(r, queue, lane(1))
    assert backlog == ids[2:]
    queue.pause(lane(1))
    assert pending(r, queue, lane(1)) == backlog
    assert active(r, queue) == [c.job_id for c in claimed]
    assert queue.lane(lane(1)).inflight == 2
    for c in claimed:
        row = queue.job(c.job_id)
        assert row is not None
        assert row["state"] == "active"
    queue.complete(claimed[0].job_id, claimed[0].token)
    assert ring(r, queue) == []


def test_enqueue_into_a_paused_lane_does_not_put_it_on_the_ring(
    r: redis.Redis, queue: Queue
) -> None:
    queue.pause(lane(1))
    fill(queue, lane(1), 3)
    assert ring(r, queue) == []
    assert on_ring(r, queue) == set()
    assert queue.depth(lane(1)) == 3
    assert queue.claim(LONG_LEASE) is None


def test_resume_puts_a_serviceable_lane_back_at_the_tail(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 3)
    fill(queue, lane(2), 3)
    queue.pause(lane(1))
    assert queue.resume(lane(1)) is True
    assert ring(r, queue) == [lane(2), lane(1)]
    assert queue.lane(lane(1)).paused is False
    assert [claim_one(queue).lane for _ in range(2)] == [lane(2), lane(1)]


def test_resume_leaves_an_empty_lane_off_the_ring(r: redis.Redis, queue: Queue) -> None:
    queue.pause(lane(1))
    queue.resume(lane(1))
    assert ring(r, queue) == []
    assert on_ring(r, queue) == set()


def test_resume_leaves_a_lane_at_its_ceiling_off_the_ring(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 3)
    queue.set_limit(lane(1), 1)
    claim_one(queue)
    queue.pause(lane(1))
    queue.resume(lane(1))
    assert ring(r, queue) == []


def test_pause_and_resume_answer_whether_anything_changed(queue: Queue) -> None:
    fill(queue, lane(1), 1)
    assert queue.resume(lane(1)) is False
    assert queue.pause(lane(1)) is True
    assert queue.pause(lane(1)) is False
    assert queue.resume(lane(1)) is True
    assert queue.resume(lane(1)) is False


# -- drain -----------------------------------------------------------------


def test_drain_deletes_pending_jobs_and_their_rows(r: redis.Redis, queue: Queue) -> None:
    ids = fill(queue, lane(1), 5)
    kept = fill(queue, lane(2), 2)
    assert queue.drain(lane(1)) == 5
    assert queue.depth(lane(1)) == 0
    assert all(queue.job(i) is None for i in ids)
    assert all(queue.job(i) is not None for i in kept)
    assert ring(r, queue) == [lane(2)]
    assert queue.totals().pending == 2
    assert [info.lane for info in queue.lanes()] == [lane(2)]


def test_drain_keeps_settings_and_in_flight_jobs(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 6)
    queue.set_weight(lane(1), 2)
    queue.set_limit(lane(1), 4)
    claimed = claim_turn(queue)
    queue.pause(lane(1))
    assert queue.drain(lane(1)) == 4
    info = queue.lane(lane(1))
    assert (info.depth, info.inflight, info.ceiling, info.weight, info.paused) == (0, 2, 4, 2, True)
    assert active(r, queue) == [c.job_id for c in claimed]
    for c in claimed:
        queue.complete(c.job_id, c.token)
    assert queue.totals().active == 0


def test_drain_takes_the_lane_off_the_ring(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 3)
    fill(queue, lane(2), 3)
    queue.drain(lane(1))
    assert ring(r, queue) == [lane(2)]
    assert on_ring(r, queue) == {lane(2)}
    fill(queue, lane(1), 1)
    assert ring(r, queue) == [lane(2), lane(1)]


def test_drain_empties_a_lane_deeper_than_one_batch(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 1234)
    assert queue.drain(lane(1)) == 1234
    assert queue.depth(lane(1)) == 0
    assert queue.totals().pending == 0
    assert r.keys(queue.keys.prefix + "job:*") == []


def test_drain_leaves_scheduled_jobs_of_the_lane(queue: Queue) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    scheduled = queue.enqueue(lane(1), TASK, run_after=later)
    fill(queue, lane(1), 2)
    assert queue.drain(lane(1)) == 2
    row = queue.job(scheduled.job_id)
    assert row is not None
    assert row["state"] == "scheduled"


def test_drain_of_an_empty_lane_deletes_nothing(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(2), 2)
    before = dump(r)
    assert queue.drain(lane(1)) == 0
    assert dump(r) == before


# -- move ------------------------------------------------------------------


def test_move_keeps_the_jobs_mint_place(r: redis.Redis, queue: Queue) -> None:
    early = fill(queue, lane(1), 2)
    late = fill(queue, lane(2), 2, start=10)
    assert queue.move(early[1], lane(2)) is True
    assert pending(r, queue, lane(2)) == [early[1], *late]
    assert pending(r, queue, lane(1)) == [early[0]]
    claims = queue.claim(LONG_LEASE, turns=10)
    assert claims is not None
    assert [c.job_id for c in claims if c.lane == lane(2)] == [early[1], *late]
    row = queue.job(early[1])
    assert row is not None
    assert row["group"] == lane(2)


def test_move_fixes_both_lanes_ring_membership(r: redis.Redis, queue: Queue) -> None:
    ids = fill(queue, lane(1), 2)
    assert ring(r, queue) == [lane(1)]
    queue.move(ids[1], lane(2))
    assert ring(r, queue) == [lane(1), lane(2)]
    queue.move(ids[0], lane(2))
    assert ring(r, queue) == [lane(2)]
    assert on_ring(r, queue) == {lane(2)}
    assert [c.job_id for c in queue.claim(LONG_LEASE, turns=5) or []] == ids
    assert [info.lane for info in queue.lanes()] == []


def test_move_into_a_paused_lane_keeps_it_off_the_ring(r: redis.Redis, queue: Queue) -> None:
    (job_id,) = fill(queue, lane(1), 1)
    queue.pause(lane(2))
    queue.move(job_id, lane(2))
    assert ring(r, queue) == []
    assert queue.depth(lane(2)) == 1


def test_moving_an_active_job_raises_invalid_job_state(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 2)
    c = claim_one(queue)
    before = dump(r)
    with pytest.raises(InvalidJobState):
        queue.move(c.job_id, lane(2))
    assert dump(r) == before


def test_moving_a_finished_job_raises_invalid_job_state(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 1)
    c = claim_one(queue)
    queue.complete(c.job_id, c.token)
    before = dump(r)
    with pytest.raises(InvalidJobState):
        queue.move(c.job_id, lane(2))
    assert dump(r) == before


def test_moving_into_its_own_lane_answers_false_and_changes_nothing(
    r: redis.Redis, queue: Queue
) -> None:
    (job_id,) = fill(queue, lane(1), 1)
    before = dump(r)
    assert queue.move(job_id, lane(1)) is False
    assert dump(r) == before


def test_moving_an_unknown_job_raises_job_not_found(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 1)
    before = dump(r)
    with pytest.raises(JobNotFound):
        queue.move("JOBnothere", lane(2))
    assert dump(r) == before


def test_moved_scheduled_job_is_promoted_into_its_new_lane(r: redis.Redis, queue: Queue) -> None:
    soon = datetime.now(UTC) + timedelta(milliseconds=100)
    job = queue.enqueue(lane(1), TASK, run_after=soon)
    assert queue.move(job.job_id, lane(2)) is True
    assert queue.depth(lane(2)) == 0
    wait_until(lambda: queue.promote()[0] == 1)
    assert pending(r, queue, lane(2)) == [job.job_id]
    assert queue.depth(lane(1)) == 0
    assert ring(r, queue) == [lane(2)]
