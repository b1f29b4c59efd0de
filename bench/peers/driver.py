"""Drive one peer queue (RQ, Celery, Dramatiq, Huey, arq) against the benchmark's server.

Runs inside ``bench/.venv-peers`` (``bench/run.py`` calls it there)::

    bench/.venv-peers/bin/python bench/peers/driver.py throughput rq --url redis://...
    bench/.venv-peers/bin/python bench/peers/driver.py incr huey --url ... --threads 1
    bench/.venv-peers/bin/python bench/peers/driver.py fairness rq --url ... --flood 1000
    bench/.venv-peers/bin/python bench/peers/driver.py memory rq --url ... --jobs 100000
    bench/.venv-peers/bin/python bench/peers/driver.py io arq --url ... --jobs 5000 --threads 500

Each mode flushes the server first and prints one JSON object on its last line.

throughput: enqueue ``--jobs`` jobs one call each (the peer's ordinary API): a
``mark("start")`` job, no-ops, a ``mark("end")`` job; then start the peer's
worker and time from the start mark to the end mark (each mark records the time
it ran). Every peer's no-op does nothing; the two marks are one SET each.

incr (Huey): ``--jobs`` jobs of one ``INCR`` each (``common.incr``, the body
django-emq's side runs too), then the worker; timed from the first INCR to the
last, as the jobs record them.

io: ``--jobs`` jobs that wait ``--ms`` each, ``--threads`` at once: arq's
coroutine jobs (``max_jobs``), timed from the results arq keeps; a threaded
peer's sleeping jobs (Dramatiq, Celery), timed from the record each leaves.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import redis

if __name__ == "__main__":  # run as a script: import bench.peers from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.peers import common
from bench.peers.procs import (
    WorkerProcess,
    children_cpu,
    fairness_probe,
    flush,
    parse_runs,
    server_cpu,
    used_memory,
)

ROOT = Path(__file__).resolve().parents[2]

BIN = Path(sys.executable).parent
CHUNK = 1_000


class Peer:
    """One peer: how to enqueue on it, how to run its worker, what is left queued."""

    name = ""
    dist = ""
    stop_signal = signal.SIGTERM
    burst = False

    def enqueue(self, kind: str, *args: Any) -> None:
        raise NotImplementedError

    def worker(self, processes: int, threads: int) -> list[str]:
        raise NotImplementedError

    def pending(self, client: redis.Redis) -> int:
        raise NotImplementedError

    def io_worker(self, threads: int) -> list[str]:
        raise NotImplementedError


class RQ(Peer):
    name, dist = "rq", "rq"
    burst = True

    def __init__(self) -> None:
        from rq import Queue

        from bench.peers import rq_tasks

        self.tasks = rq_tasks
        self.queue = Queue("default", connection=common.client())

    def enqueue(self, kind: str, *args: Any) -> None:
        self.queue.enqueue(getattr(self.tasks, kind), *args)

    def enqueue_bulk(self, kind: str, args: list[tuple[Any, ...]]) -> None:
        """Many jobs per round trip (``Queue.enqueue_many`` in one pipeline per chunk)."""
        from rq import Queue

        func = getattr(self.tasks, kind)
        for i in range(0, len(args), CHUNK):
            with common.client().pipeline() as pipe:
                self.queue.enqueue_many(
                    [Queue.prepare_data(func, a) for a in args[i : i + CHUNK]], pipeline=pipe
                )
                pipe.execute()

    def worker(self, processes: int, threads: int, burst: bool = True) -> list[str]:
        argv = [str(BIN / "rq"), "worker", "-w", "rq.worker.SimpleWorker", "-u", common.url()]
        return [*argv, "--path", str(ROOT), *(["--burst"] if burst else []), "default"]

    def pending(self, client: redis.Redis) -> int:
        return int(client.llen("rq:queue:default"))


class CeleryPeer(Peer):
    name, dist = "celery", "celery"

    def __init__(self) -> None:
        from bench.peers import celery_app

        self.tasks = celery_app

    def enqueue(self, kind: str, *args: Any) -> None:
        getattr(self.tasks, kind).delay(*args)

    def worker(self, processes: int, threads: int) -> list[str]:
        return [str(BIN / "celery"), "-A", "bench.peers.celery_app", "worker", "-P", "solo"]

    def io_worker(self, threads: int) -> list[str]:
        argv = [str(BIN / "celery"), "-A", "bench.peers.celery_app", "worker"]
        return [*argv, "-P", "threads", "-c", str(threads)]

    def pending(self, client: redis.Redis) -> int:
        return int(client.llen("celery"))


class DramatiqPeer(Peer):
    name, dist = "dramatiq", "dramatiq"

    def __init__(self) -> None:
        from bench.peers import dramatiq_tasks

        self.tasks = dramatiq_tasks

    def enqueue(self, kind: str, *args: Any) -> None:
        getattr(self.tasks, kind).send(*args)

    def worker(self, processes: int, threads: int) -> list[str]:
        argv = [str(BIN / "dramatiq"), "bench.peers.dramatiq_tasks", "--path", str(ROOT)]
        if processes:  # 0: dramatiq's own defaults
            argv += ["--processes", str(processes), "--threads", str(threads)]
        return argv

    def pending(self, client: redis.Redis) -> int:
        return int(client.llen("dramatiq:default"))

    def io_worker(self, threads: int) -> list[str]:
        return self.worker(1, threads)


class HueyPeer(Peer):
    name, dist = "huey", "huey"
    stop_signal = signal.SIGINT  # huey: SIGINT is the graceful stop

    def __init__(self) -> None:
        from bench.peers import huey_tasks

        self.tasks = huey_tasks

    def enqueue(self, kind: str, *args: Any) -> None:
        getattr(self.tasks, kind)(*args)

    def worker(self, processes: int, threads: int) -> list[str]:
        return [str(BIN / "huey_consumer"), "bench.peers.huey_tasks.huey", "-w", str(threads or 1)]

    def pending(self, client: redis.Redis) -> int:
        return int(self.tasks.huey.pending_count())


PEERS: dict[str, Callable[[], Peer]] = {
    "rq": RQ,
    "celery": CeleryPeer,
    "dramatiq": DramatiqPeer,
    "huey": HueyPeer,
}


def _env() -> dict[str, str]:
    return {**os.environ, common.URL_ENV: common.url(), "PYTHONPATH": str(ROOT)}


def wait_until(done: Callable[[], bool], worker: WorkerProcess, timeout: float = 600) -> str | None:
    """Poll ``done`` until it holds: ``None``, or why it never will (the worker
    exited, or ``timeout`` seconds passed)."""
    deadline = time.monotonic() + timeout
    while not done():
        if not worker.running():
            return f"worker exited (code {worker.proc and worker.proc.returncode}) early"
        if time.monotonic() > deadline:
            return f"timed out after {timeout:g} s"
        time.sleep(0.01)
    return None


def throughput(peer: Peer, jobs: int, processes: int, threads: int, log: Path) -> dict[str, Any]:
    client = common.client()
    flush(client)
    start = time.perf_counter()
    peer.enqueue("mark", "start")
    for i in range(jobs - 2):
        peer.enqueue("noop", i)
    peer.enqueue("mark", "end")
    enqueue_s = time.perf_counter() - start
    queued = peer.pending(client)
    worker = WorkerProcess(peer.worker(processes, threads), log, _env(), ROOT).start()
    end_key = common.MARK_PREFIX + "end"
    error = wait_until(lambda: bool(client.exists(end_key)), worker)
    wall = time.perf_counter() - worker.started
    if peer.burst:  # exits by itself once the queue is empty; the others are told to
        worker.wait(5)
    worker.stop(peer.stop_signal)
    left = peer.pending(client)
    first = client.get(common.MARK_PREFIX + "start")
    last = client.get(end_key)
    result: dict[str, Any] = {
        "peer": peer.name,
        "version": version(peer.dist),
        "argv": " ".join(Path(a).name if i == 0 else a for i, a in enumerate(worker.argv)),
        "jobs": jobs,
        "queued": queued,
        "left": left,
        "enqueue_jobs_per_s": round(jobs / enqueue_s, 1),
        "wall_s": round(wall, 3),
        "error": error,
    }
    if first is not None and last is not None and error is None:
        drain = float(last) - float(first)
        result["drain_s"] = round(drain, 3)
        result["jobs_per_s"] = round((jobs - 1) / drain, 1)
    else:
        result["tail"] = worker.tail()
    return result


def incr(peer: Peer, jobs: int, threads: int, log: Path) -> dict[str, Any]:
    """``jobs`` jobs of one ``INCR`` each (``common.incr``), enqueued one call each,
    then the peer's worker started; jobs/s from the first INCR to the last (the
    jobs record both), so the worker's start-up is not counted. Also the CPU the
    worker process spent per job (its whole life, start-up included) and the
    server's while the worker ran."""
    client = common.client()
    flush(client)
    for _ in range(jobs):
        peer.enqueue("incr", jobs)
    cpu, server = children_cpu(), server_cpu(client)
    worker = WorkerProcess(peer.worker(1, threads), log, _env(), ROOT).start()
    error = wait_until(lambda: common.incr_rate(client, jobs)[2] is not None, worker)
    worker.stop(peer.stop_signal)
    done, span, rate = common.incr_rate(client, jobs)
    result: dict[str, Any] = {
        "peer": peer.name, "version": version(peer.dist), "jobs": jobs, "done": done,
        "error": error,
        "worker_cpu_us_per_job": round((children_cpu() - cpu) / jobs * 1e6, 1),
        "server_cpu_us_per_job": round((server_cpu(client) - server) / jobs * 1e6, 1),
    }  # fmt: skip
    if rate is not None and span is not None and error is None:
        result["span_s"] = round(span, 3)
        result["jobs_per_s"] = round(rate, 1)
    else:
        result["tail"] = worker.tail()
    return result


def io_async(jobs: int, ms: float, max_jobs: int, log: Path) -> dict[str, Any]:
    """arq: ``jobs`` coroutine jobs that await ``ms`` ms, one burst worker with
    ``max_jobs``; jobs/s from the first job's start to the last one's finish (the
    results arq keeps)."""
    import asyncio

    from arq import create_pool
    from arq.connections import RedisSettings

    client = common.client()
    flush(client)

    async def enqueue() -> None:
        pool = await create_pool(RedisSettings.from_dsn(common.url()))
        for _ in range(jobs):
            await pool.enqueue_job("io_async", ms)
        await pool.aclose()

    async def results() -> list[Any]:
        """The results arq keeps, 50 reads at a time (its ``all_job_results`` reads
        them all at once, past redis-py's pool of 100 connections)."""
        from arq.jobs import Job

        pool = await create_pool(RedisSettings.from_dsn(common.url()))
        ids = [key.decode().split(":", 2)[2] for key in await pool.keys("arq:result:*")]
        found: list[Any] = []
        for i in range(0, len(ids), 50):
            found += await asyncio.gather(*(Job(j, pool).result_info() for j in ids[i : i + 50]))
        await pool.aclose()
        return [r for r in found if r is not None]

    asyncio.run(enqueue())
    argv = [str(BIN / "arq"), "bench.peers.arq_tasks.WorkerSettings"]
    env = {**_env(), "BENCH_ARQ_MAX_JOBS": str(max_jobs)}
    worker = WorkerProcess(argv, log, env, ROOT).start()
    code = worker.wait(600)
    wall = time.perf_counter() - worker.started
    worker.stop()
    done = [r for r in asyncio.run(results()) if r.success]
    result: dict[str, Any] = {
        "peer": "arq", "version": version("arq"), "label": f"max_jobs={max_jobs}",
        "jobs": jobs, "done": len(done), "wall_s": round(wall, 3), "exit": code,
    }  # fmt: skip
    if done:
        first = min(r.start_time for r in done)
        last = max(r.finish_time for r in done)
        result["jobs_per_s"] = round(len(done) / (last - first).total_seconds(), 1)
    else:
        result["tail"] = worker.tail()
    return result


def io_sync(peer: Peer, jobs: int, ms: float, threads: int, log: Path) -> dict[str, Any]:
    """A threaded peer: ``jobs`` jobs that sleep ``ms`` ms and record when they ran
    (``common.timed``); jobs/s from the first start to the last end."""
    client = common.client()
    flush(client)
    for i in range(jobs):
        peer.enqueue("timed", f"j{i}", ms)
    worker = WorkerProcess(peer.io_worker(threads), log, _env(), ROOT).start()
    deadline = time.monotonic() + 600
    while client.llen(common.RUNS_KEY) < jobs and worker.running():
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    worker.stop(peer.stop_signal)
    runs = parse_runs(client.lrange(common.RUNS_KEY, 0, -1))  # type: ignore[arg-type]
    result: dict[str, Any] = {
        "peer": peer.name, "version": version(peer.dist), "label": f"{threads} threads",
        "jobs": jobs, "done": len(runs),
    }  # fmt: skip
    if runs:
        span = max(r.end for r in runs) - min(r.start for r in runs)
        result["jobs_per_s"] = round(len(runs) / span, 1)
    else:
        result["tail"] = worker.tail()
    return result


def fairness(
    flood: int, b_jobs: int, ms: float, warm: int, cap: float, log: Path
) -> dict[str, Any]:
    """Producer A's flood, then producer B's ``b_jobs``, through RQ's one queue (FIFO)."""
    peer = RQ()
    client = common.client()
    flush(client)
    start = time.perf_counter()
    peer.enqueue_bulk("timed", [("A", ms)] * flood)
    enqueue_s = time.perf_counter() - start

    def enqueue_b(prefix: str) -> None:
        for i in range(b_jobs):
            peer.enqueue("timed", f"{prefix}{i}", ms)

    worker = WorkerProcess(peer.worker(1, 1, burst=False), log, _env(), ROOT).start()
    try:
        result = fairness_probe(
            client,
            worker,
            enqueue_b,
            b_jobs=b_jobs,
            warm=warm,
            cap=cap,
            flood=flood,
        )
    finally:
        worker.stop(peer.stop_signal)
    flush(client)
    return {
        "peer": "rq",
        "version": version("rq"),
        "flood_enqueue_jobs_per_s": round(flood / enqueue_s, 1),
        **result,
    }


def memory(jobs: int) -> dict[str, Any]:
    """Bytes of ``used_memory`` per pending RQ job (no-op with one small argument)."""
    peer = RQ()
    client = common.client()
    flush(client)
    before = used_memory(client)
    peer.enqueue_bulk("noop", [(i,) for i in range(jobs)])
    after = used_memory(client)
    pending = peer.pending(client)
    flush(client)
    return {
        "peer": "rq",
        "version": version("rq"),
        "jobs": jobs,
        "pending": pending,
        "used_memory_before": before,
        "used_memory_after": after,
        "bytes_per_job": round((after - before) / jobs, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("mode", choices=["throughput", "incr", "fairness", "memory", "io"])
    parser.add_argument("peer", choices=sorted([*PEERS, "arq"]))
    parser.add_argument("--url", required=True, help="redis:// URL of the benchmark's server")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--processes", type=int, default=0, help="dramatiq: 0 = its default")
    parser.add_argument("--threads", type=int, default=0, help="dramatiq/huey: 0 = default")
    parser.add_argument("--flood", type=int, default=1_000)
    parser.add_argument("--b-jobs", type=int, default=10)
    parser.add_argument("--ms", type=float, default=2.0)
    parser.add_argument("--warm", type=int, default=20)
    parser.add_argument("--cap", type=float, default=60.0)
    parser.add_argument("--log", type=Path, default=Path("/dev/null"))
    args = parser.parse_args()
    os.environ[common.URL_ENV] = args.url
    if args.mode == "io":
        if args.peer == "arq":
            result = io_async(args.jobs, args.ms, args.threads, args.log)
        else:
            result = io_sync(PEERS[args.peer](), args.jobs, args.ms, args.threads, args.log)
    elif args.peer == "arq":
        parser.error("arq is measured in io mode only")
    elif args.mode == "throughput":
        result = throughput(PEERS[args.peer](), args.jobs, args.processes, args.threads, args.log)
    elif args.mode == "incr":
        if args.peer != "huey":
            parser.error("incr is measured for huey only")
        result = incr(PEERS[args.peer](), args.jobs, args.threads, args.log)
    elif args.peer != "rq":
        parser.error(f"{args.mode} is measured for rq only")
    elif args.mode == "fairness":
        result = fairness(args.flood, args.b_jobs, args.ms, args.warm, args.cap, args.log)
    else:
        result = memory(args.jobs)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
