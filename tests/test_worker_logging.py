"""A worker run in-process (``call_command("run_emq_worker")``, as an async
test suite or an ASGI hook does) leaves its caller's logging as it found it:
a ``django.tasks`` logger the caller configured keeps its level, its
propagation and its handler, which gets Django's per-job lines during the run
and the enqueue lines after it. Run in a process of its own, with no root
handler (pytest's capture would be one) and no ``LOGGING``: the case where the
worker prints through a handler of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import json, logging, os
import django
django.setup()
from django.core.management import call_command
from django_emq import lane, lane_id
from tests.tasks import add

lines = []
class Keep(logging.Handler):
    def emit(self, record):
        lines.append(record.getMessage())

tasks = logging.getLogger("django.tasks")
mine = Keep()
if os.environ["CONFIGURE"] == "1":
    tasks.addHandler(mine)
    tasks.setLevel(logging.DEBUG)
emq = logging.getLogger("django_emq")
emq_before = (emq.level, list(emq.handlers), emq.propagate)
with lane(lane_id("USR", 1)):
    add.enqueue(1, 2)
before = len(lines)
call_command("run_emq_worker", burst=True, verbosity=0)
during = lines[before:]
with lane(lane_id("USR", 1)):
    add.enqueue(3, 4)
print(json.dumps({
    "before": before,
    "during": during,
    "after": len(lines) - before - len(during),
    "level": tasks.level,
    "propagate": tasks.propagate,
    "handlers": [h is mine for h in tasks.handlers],
    "emq_restored": (emq.level, list(emq.handlers), emq.propagate) == emq_before,
}))
"""


def run_script(environ: dict[str, str] | None = None) -> dict[str, Any]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(ROOT),
           **(environ or {})}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()
    found: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return found


def test_an_in_process_worker_leaves_a_configured_django_tasks_logger_alone(
    emq: redis.Redis,
) -> None:
    """The caller's handler on ``django.tasks`` (at DEBUG) gets the job's
    RUNNING and SUCCESSFUL lines during the run and the enqueue line after it;
    level, propagation and handlers are the caller's throughout, and the
    ``django_emq`` logger is put back as it was."""
    found = run_script({"CONFIGURE": "1"})
    assert found["before"] == 1  # the enqueue's line
    assert any("state=RUNNING" in line for line in found["during"]), found
    assert any("state=SUCCESSFUL" in line for line in found["during"]), found
    assert found["after"] == 1, found
    assert (found["level"], found["propagate"], found["handlers"]) == (10, True, [True])
    assert found["emq_restored"] is True


def test_an_in_process_worker_puts_back_the_django_tasks_logger_it_set_up(
    emq: redis.Redis,
) -> None:
    """Left to the worker (not configured), ``django.tasks`` prints through the
    worker's handler during the run (here at ``-v 0``: nothing), and is
    unconfigured again after it: no level, propagating, no handler."""
    found = run_script({"CONFIGURE": "0"})
    assert (found["level"], found["propagate"], found["handlers"]) == (0, True, [])
    assert found["emq_restored"] is True
