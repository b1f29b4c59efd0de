"""The worker as a process: signals, kills, several workers at once.

Each test carries the name and the assertions of a test in django-tasks-db's
``DatabaseWorkerProcessTestCase``. The plumbing is ours: the worker is
``manage.py run_emq_worker`` under the contract's settings, and where the
reference sleeps for a second and hopes the job started, we wait until the
result reads RUNNING. One difference is deliberate and asserted as such: a
second Ctrl-C ends our worker at once instead of failing the running job
(see ``test_repeat_ctrl_c``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.tasks import TaskResult, TaskResultStatus

from django_emq.connection import get_connection

from . import tasks as test_tasks

ROOT = Path(__file__).resolve().parents[2]
#: Longest a test waits for a worker to do what it must (a safety limit).
PATIENCE = 60.0


class Workers:
    """Worker processes started by one test; each is killed at its end."""

    def __init__(self) -> None:
        self.processes: list[subprocess.Popen[str]] = []

    def start(self, *args: str, worker_id: str | None = None) -> subprocess.Popen[str]:
        argv = [sys.executable, "-m", "django", "run_emq_worker", "--verbosity", "3", *args]
        if worker_id is not None:
            argv += ["--worker-id", worker_id]
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.contract.settings",
            "PYTHONPATH": str(ROOT),
        }
        process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            # A shell starts background jobs with SIGINT ignored: give Ctrl-C back.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.processes.append(process)
        return process


@pytest.fixture
def workers() -> Iterator[Workers]:
    started = Workers()
    yield started
    for process in started.processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()


def wait_for_line(process: subprocess.Popen[str], text: str) -> None:
    """Read the worker's output until a line holds ``text`` (it ends if it exits)."""
    assert process.stdout is not None
    for line in process.stdout:
        if text in line:
            return
    raise AssertionError(f"the worker exited without saying {text!r}")


def wait_until_running(process: subprocess.Popen[str], result: TaskResult[Any, Any]) -> None:
    """Until the job reads RUNNING and its task has started (the reference
    sleeps a second and hopes it did): a job claimed but not started yet is
    handed back on a signal, so the signal must come after this. The long
    tasks say they started in a Valkey list (``tasks.STARTED``)."""
    deadline = time.monotonic() + PATIENCE
    while True:
        assert process.poll() is None, "the worker exited before it ran the job"
        result.refresh()
        if result.status == TaskResultStatus.RUNNING and get_connection().llen(test_tasks.STARTED):
            return
        assert time.monotonic() < deadline, f"job {result.id} never started"
        time.sleep(0.02)


def test_run_subprocess(workers: Workers) -> None:
    result = test_tasks.noop_task.enqueue()
    process = workers.start("--burst")
    process.wait(PATIENCE)
    assert process.returncode == 0

    assert result.status == TaskResultStatus.READY
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL  # type: ignore[comparison-overlap]


def test_interrupt_no_tasks(workers: Workers) -> None:
    process = workers.start()
    wait_for_line(process, "concurrency")  # started (the reference sleeps a second)
    process.terminate()
    process.wait(PATIENCE)
    assert process.returncode == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_signals(workers: Workers, sig: signal.Signals) -> None:
    result = test_tasks.sleep_for.enqueue(2)
    process = workers.start()
    wait_until_running(process, result)
    assert result.worker_ids != []

    process.send_signal(sig)
    output, _ = process.communicate(timeout=PATIENCE)
    assert process.returncode == 0, output

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL, output


def test_repeat_ctrl_c(workers: Workers) -> None:
    """Difference: the reference fails the running job on a second Ctrl-C and
    exits 0. Ours exits at once (status 1) without touching the job: it stays
    RUNNING until its lease expires, then returns to the head of its lane and
    runs again (at least once), so a second Ctrl-C never loses work."""
    result = test_tasks.hang.enqueue()
    process = workers.start(worker_id="contract-worker")
    wait_until_running(process, result)
    assert result.worker_ids == ["contract-worker"]

    process.send_signal(signal.SIGINT)
    wait_for_line(process, "no new claims")  # taken: two at once would be one
    assert process.poll() is None  # the first one lets the running job finish
    result.refresh()
    assert result.status == TaskResultStatus.RUNNING
    assert result.worker_ids == ["contract-worker"]

    process.send_signal(signal.SIGINT)
    process.wait(PATIENCE)
    assert process.returncode == 1

    result.refresh()
    assert result.status == TaskResultStatus.RUNNING
    assert result.errors == []


def test_kill(workers: Workers) -> None:
    result = test_tasks.hang.enqueue()
    process = workers.start()
    wait_until_running(process, result)

    process.kill()
    process.wait(PATIENCE)
    assert process.returncode == -signal.SIGKILL

    result.refresh()
    # Until its lease expires; then the next worker's reaper returns it to its lane.
    assert result.status == TaskResultStatus.RUNNING


def test_system_exit_task(workers: Workers) -> None:
    result = test_tasks.failing_task_system_exit.enqueue()
    process = workers.start("--burst")
    process.wait(PATIENCE)
    assert process.returncode == 0

    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class is SystemExit


def test_keyboard_interrupt_task(workers: Workers) -> None:
    result = test_tasks.failing_task_keyboard_interrupt.enqueue()
    process = workers.start("--burst")
    process.wait(PATIENCE)
    assert process.returncode == 0

    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class is KeyboardInterrupt


def test_multiple_workers(workers: Workers) -> None:
    results = [test_tasks.sleep_for.enqueue(0.1) for _ in range(10)]

    for _ in range(3):
        workers.start("--burst")
    outputs = []
    for process in workers.processes:
        output, _ = process.communicate(timeout=PATIENCE)
        assert process.returncode == 0
        outputs.append(output)

    for result in results:
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL
    all_output = "".join(outputs)
    for result in results:
        # Running and successful, each logged once by the one worker that ran it.
        assert all_output.count(f"Task id={result.id} ") == 2
