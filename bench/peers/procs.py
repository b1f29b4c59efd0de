"""Worker processes and the fairness probe, shared by ``bench/run.py`` (django-emq,
in the project's venv) and ``bench/peers/driver.py`` (the peers, in
``bench/.venv-peers``). Standard library and redis-py only, so both sides import it.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import redis

#: ``"<label> <start> <end>"`` entries (epoch seconds) the timed jobs append.
RUNS_KEY = "bench:runs"


@dataclass
class WorkerProcess:
    """A worker started in a session of its own, so it and its children stop together."""

    argv: list[str]
    log_path: Path
    env: dict[str, str]
    cwd: Path
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    _log: BinaryIO | None = field(default=None, repr=False)

    def start(self) -> WorkerProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            self.argv,
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait(self, timeout: float) -> int | None:
        """Wait for the process to exit by itself; its exit code, or ``None`` on timeout."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, sig: int = signal.SIGTERM, grace: float = 30.0) -> int:
        """Send ``sig`` to the worker's process group, then SIGKILL it after ``grace`` s."""
        assert self.proc is not None
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, sig)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                _signal_group(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None
        return self.proc.returncode

    def tail(self, lines: int = 15) -> str:
        """The end of the worker's log, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)  # the group of the session this harness started for it


def flush(client: redis.Redis) -> None:
    """Empty the server now: ``FLUSHALL SYNC``, then wait out any lazy free still running
    (Valkey frees in the background by default), so ``used_memory`` reads true after."""
    client.execute_command("FLUSHALL", "SYNC")  # type: ignore[no-untyped-call]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        info: dict[str, Any] = client.info("memory")
        if not int(info.get("lazyfree_pending_objects", 0)):
            return
        time.sleep(0.01)


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's children that have ended
    and been waited for: read before a worker starts and after it stopped, the
    difference is that worker's whole life, start-up included."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def server_cpu(client: redis.Redis) -> float:
    """CPU seconds (user + system) the server has spent since it started."""
    info: dict[str, Any] = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def used_memory(client: redis.Redis) -> int:
    """The server's ``used_memory`` (bytes)."""
    info: dict[str, Any] = client.info("memory")
    return int(info["used_memory"])


@dataclass(frozen=True)
class Run:
    """One timed job's record."""

    label: str
    start: float
    end: float


def parse_runs(entries: Sequence[bytes]) -> list[Run]:
    runs = []
    for entry in entries:
        label, start, end = entry.decode().split()
        runs.append(Run(label, float(start), float(end)))
    return runs


def fairness_probe(
    client: redis.Redis,
    worker: WorkerProcess,
    enqueue_b: Callable[[str], None],
    *,
    b_jobs: int,
    warm: int,
    cap: float,
    flood: int,
    probes: int = 1,
) -> dict[str, Any]:
    """Producer A's flood is queued and ``worker`` is started: wait until it has run
    ``warm`` of A's jobs, then let producer B enqueue its ``b_jobs`` jobs
    (``enqueue_b(prefix)`` enqueues them labelled ``<prefix><i>``) and watch the
    runs list until B's last job finished, or ``cap`` seconds passed. With
    ``probes`` > 1, B does it again as soon as its jobs are done, and the median
    wait is reported (the flood is far from drained by then).

    B's wait runs from just before its first enqueue to its last job's end; the
    A jobs that ran meanwhile are the ones that started after B enqueued and
    before B's last job ended.
    """
    deadline = time.monotonic() + 120
    while client.llen(RUNS_KEY) < warm:
        if not worker.running():
            raise RuntimeError(f"the worker exited before warming up:\n{worker.tail()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the worker ran fewer than {warm} jobs in 120 s:\n{worker.tail()}")
        time.sleep(0.005)
    seen: list[Run] = []
    offset = 0
    rounds: list[dict[str, Any]] = []
    for probe in range(probes):
        prefix = f"B{probe}."
        t0 = time.time()
        enqueue_b(prefix)
        enqueued_s = time.time() - t0
        b_done = [r for r in seen if r.label.startswith(prefix)]
        while len(b_done) < b_jobs and time.time() - t0 < cap:
            if not worker.running():
                raise RuntimeError(f"the worker exited during the fairness run:\n{worker.tail()}")
            fresh = parse_runs(client.lrange(RUNS_KEY, offset, -1))  # type: ignore[arg-type]
            offset += len(fresh)
            seen += fresh
            b_done += [r for r in fresh if r.label.startswith(prefix)]
            time.sleep(0.002)
        complete = len(b_done) == b_jobs
        horizon = max(r.end for r in b_done) if complete else time.time()
        rounds.append(
            {
                "complete": complete,
                "b_wait_s": round(horizon - t0, 4),
                "b_enqueue_s": round(enqueued_s, 4),
                "a_ran_while_b_waited": sum(
                    1 for r in seen if r.label == "A" and t0 <= r.start <= horizon
                ),
                "jobs_per_s": _rate([r for r in seen if t0 <= r.start <= horizon]),
            }
        )
        if not complete:
            break
    middle = sorted(rounds, key=lambda r: float(r["b_wait_s"]))[len(rounds) // 2]
    return {"flood": flood, "b_jobs": b_jobs, "cap_s": cap, **middle, "probes": rounds}


def _rate(runs: Sequence[Run]) -> float | None:
    if len(runs) < 2:
        return None
    span = max(r.end for r in runs) - min(r.start for r in runs)
    return round(len(runs) / span, 1) if span > 0 else None
