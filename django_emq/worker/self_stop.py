"""Whether the worker's own code (a job's) sent the stop signal it got.

A SIGTERM from outside (a deploy, a supervisor) stops the worker and releases,
uncounted, the jobs still running once the grace is over: they are not at fault.
A job that sends its own worker SIGTERM (``os.kill(os.getpid(), SIGTERM)``)
and outlives the grace would be released the same way, and stop every worker
that claims it again, for ever. So the worker watches, through a Python audit
hook (``os.kill``, ``os.killpg``, ``signal.pthread_kill``), for a stop signal
sent from inside its own process; when one was, the job that sent it (known
by :data:`running_job`, which each job's runner sets: the sync thread's, the
coroutine's task's context) is expired at the end of the grace if it still
runs (counted against ``MAX_EXPIRIES``) instead of released, as when a job
breaks or kills its worker; the other jobs still running are released as on
any stop. A signal sent from code that runs no job (a thread a job started)
names none: then every job still running is expired.

What the hook cannot see counts as a signal from outside: ``signal.raise_signal``
(it has no audit event), and signals sent by a child process or by C code.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from contextvars import ContextVar
from typing import Any

logger = logging.getLogger("django_emq.worker")

#: The signals that stop a worker.
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})

#: The id of the job the code running now belongs to (set by the sync threads'
#: and the coroutines' runners around each job), ``None`` outside a job.
running_job: ContextVar[str | None] = ContextVar("emq_running_job", default=None)

_lock = threading.Lock()
_installed = False
#: The watches of the workers running in this process now.
_watches: set[SelfStop] = set()


class SelfStop:
    """Notes, for one worker run, a stop signal this process sent itself."""

    def __init__(self) -> None:
        #: The name of the thread that sent one, or ``None``.
        self.sent_from: str | None = None
        #: The id of the job whose code sent it, when a job's (``running_job``).
        self.sent_by: str | None = None

    def __enter__(self) -> SelfStop:
        _install()
        with _lock:
            _watches.add(self)
        return self

    def __exit__(self, *exc: object) -> None:
        with _lock:
            _watches.discard(self)

    @property
    def sent(self) -> bool:
        return self.sent_from is not None


def _install() -> None:
    """Add the audit hook, once per process (an audit hook cannot be removed: it
    does nothing while no worker runs)."""
    global _installed
    with _lock:
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True


def _hook(event: str, args: tuple[Any, ...]) -> None:
    """Called for every audit event of the process: cheap for all but three."""
    if not _watches or event not in ("os.kill", "os.killpg", "signal.pthread_kill"):
        return
    target, signum = args[0], args[1]
    if signum not in STOP_SIGNALS:
        return
    if event == "os.kill":
        ours = target in (os.getpid(), 0) or target == -os.getpgrp()
    elif event == "os.killpg":
        ours = target in (0, os.getpgrp())
    else:  # a thread of this process
        ours = True
    if ours:
        sender, job = threading.current_thread().name, running_job.get()
        for watch in list(_watches):
            watch.sent_from, watch.sent_by = sender, job
