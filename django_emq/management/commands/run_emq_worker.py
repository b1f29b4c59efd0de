"""``manage.py run_emq_worker``: a thin shell over :class:`django_emq.worker.Worker`.

The options that stand for a setting (``--lease``, ``--beat``, ``--grace``,
``--prefetch``, ``--threads``) come from the table of settings
(:mod:`django_emq.conf_table`): each is parsed like its key, and wins over the
backend's ``OPTIONS`` and ``EMQ``."""

from __future__ import annotations

import logging
import time
from argparse import ArgumentParser, ArgumentTypeError
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from django.core.management.base import BaseCommand, CommandError
from django.tasks import task_backends
from django.tasks.exceptions import InvalidTaskBackend
from django.utils import autoreload

from django_emq.backend import FairLanesBackend
from django_emq.conf_table import FLAGGED, Setting
from django_emq.engine.exceptions import UNAVAILABLE, unreachable
from django_emq.engine.records import WORKER_ID_RE
from django_emq.exceptions import ConfigurationError
from django_emq.worker import Worker, WorkerOptions
from django_emq.worker.logs import FORMAT, LineFormatter, LineHandler

LEVELS = {0: logging.WARNING, 1: logging.INFO, 2: logging.DEBUG, 3: logging.DEBUG}
#: Seconds between tries to start while no node of a cluster answers.
START_RETRY = 1.0
logger = logging.getLogger("django_emq.worker")


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ArgumentTypeError(f"must be >= 1, not {value}")
    return value


def setting_type(setting: Setting) -> Callable[[str], object]:
    """The argparse type of the option that stands for ``setting``: the text
    cast like its environment variable, then parsed like the key."""

    def read(text: str) -> object:
        try:
            value = setting.env(text)
        except ValueError:
            kind = "a whole number" if setting.env is int else "a number"
            raise ArgumentTypeError(f"must be {kind}, not {text!r}") from None
        try:
            return setting.parse(value)
        except ValueError as exc:
            raise ArgumentTypeError(str(exc)) from None

    read.__name__ = setting.key.lower()
    return read


#: Longest worker id: it is kept on every job the worker claims.
MAX_WORKER_ID = 64


def worker_id(text: str) -> str:
    """A worker id: 1 to 64 of ``A-Z a-z 0-9 _ . : @ -`` (no comma: a job keeps
    its workers' ids comma-separated)."""
    if not text:
        raise ArgumentTypeError("must not be empty")
    if len(text) > MAX_WORKER_ID:
        raise ArgumentTypeError(f"must be at most {MAX_WORKER_ID} characters, not {len(text)}")
    if not WORKER_ID_RE.fullmatch(text):
        raise ArgumentTypeError(
            f"must be made of A-Z a-z 0-9 _ . : @ - (no comma, no space), not {text!r}"
        )
    return text


def configure_logging(level: int) -> Callable[[], None]:
    """The worker's lines at ``level``, each printed once: to the project's own
    handlers when its ``LOGGING`` gives the root logger some, else to a stream
    handler of the worker's own (the root logger gets none, so nothing logged
    under ``django`` shows twice). Then Django's own per-job lines
    (``django.tasks``: started, finished) go through the same handler, once,
    from ``-v 2`` on: at the default level the worker's own line per job says
    what they say, for a fraction of the cost. A ``django.tasks`` logger the
    project configured itself (a handler, a level, a filter, no propagation)
    is left as it is.

    Answers the function that puts back everything it changed, for a worker
    run in-process (``call_command``) to leave its caller's logging as it was.
    """
    emq = logging.getLogger("django_emq")
    saved = [_LoggerState.of(emq)]

    def restore() -> None:
        for state in reversed(saved):
            state.restore()

    emq.setLevel(level)
    if logging.getLogger().handlers or any(
        not isinstance(h, logging.NullHandler) for h in emq.handlers
    ):
        return restore
    handler = LineHandler()
    handler.setFormatter(LineFormatter(FORMAT))
    emq.addHandler(handler)
    tasks = logging.getLogger("django.tasks")
    if _configured(tasks):
        return restore
    saved.append(_LoggerState.of(tasks))
    tasks.addHandler(handler)
    tasks.propagate = False
    tasks.setLevel(logging.DEBUG if level <= logging.DEBUG else logging.CRITICAL)
    return restore


def _configured(found: logging.Logger) -> bool:
    """Whether the project set up ``found`` itself: a handler (other than a
    ``NullHandler``), a level, a filter, or propagation turned off."""
    return (
        found.level != logging.NOTSET
        or not found.propagate
        or bool(found.filters)
        or any(not isinstance(h, logging.NullHandler) for h in found.handlers)
    )


@dataclass(frozen=True, slots=True)
class _LoggerState:
    """What :func:`configure_logging` may change of one logger, to put back."""

    logger: logging.Logger
    level: int
    propagate: bool
    handlers: tuple[logging.Handler, ...]

    @classmethod
    def of(cls, found: logging.Logger) -> _LoggerState:
        return cls(found, found.level, found.propagate, tuple(found.handlers))

    def restore(self) -> None:
        """The level, propagation and handlers it had; a handler added since
        writes what it holds first."""
        for handler in [h for h in self.logger.handlers if h not in self.handlers]:
            if isinstance(handler, LineHandler):
                handler.write_held()
            self.logger.removeHandler(handler)
        for handler in self.handlers:
            if handler not in self.logger.handlers:
                self.logger.addHandler(handler)
        self.logger.setLevel(self.level)
        self.logger.propagate = self.propagate


class Command(BaseCommand):
    help = "Run a django-emq worker: serve the fair lanes of the backend's queues."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--backend",
            default="default",
            help="TASKS alias of a FairLanesBackend (default: default)",
        )
        parser.add_argument(
            "--queue",
            action="append",
            dest="queues",
            default=[],
            help="queue to serve (repeatable; default: every queue of the backend, or with "
            "QUEUES: [] every queue its enqueues registered, re-read each beat)",
        )
        parser.add_argument(
            "--concurrency",
            type=positive_int,
            default=1,
            help="jobs in flight at once: coroutine tasks on the event loop, sync tasks "
            "on the threads (default 1)",
        )
        parser.add_argument(
            "--burst",
            action="store_true",
            help="reap and promote, run until nothing is pending or due, exit",
        )
        parser.add_argument(
            "--max-jobs", type=positive_int, default=None, help="exit after claiming this many jobs"
        )
        parser.add_argument(
            "--worker-id", type=worker_id, default=None, help="default: host:pid (at most 64)"
        )
        for setting in FLAGGED:
            parser.add_argument(
                f"--{setting.flag}",
                type=setting_type(setting),
                default=None,
                help=f"{setting.doc} (default: the backend's OPTIONS['{setting.key}'], "
                f"else EMQ['{setting.key}'])",
            )
        parser.add_argument(
            "--reload", action="store_true", help="restart when code changes (development)"
        )
        parser.add_argument(
            "--health-file",
            type=Path,
            default=None,
            help="touch this file every beat (for liveness probes)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        restore_logging = configure_logging(LEVELS.get(options["verbosity"], logging.INFO))
        try:
            self._serve(options)
        finally:  # run in-process (call_command): the caller's logging as it was
            restore_logging()

    def _serve(self, options: dict[str, Any]) -> None:
        """Build the worker for ``--backend`` and run it (with ``--reload``, under
        Django's reloader)."""
        try:
            backend = task_backends[options["backend"]]
        except InvalidTaskBackend as exc:  # "The connection 'x' doesn't exist."
            raise CommandError(f"--backend: {exc}") from None
        if not isinstance(backend, FairLanesBackend):
            raise CommandError(
                f"TASKS[{options['backend']!r}] is {type(backend).__name__}, not "
                "django_emq.backend.FairLanesBackend"
            )
        worker_options = WorkerOptions(
            queues=options["queues"],
            concurrency=options["concurrency"],
            burst=options["burst"],
            max_jobs=options["max_jobs"],
            worker_id=options["worker_id"],
            health_file=options["health_file"],
            **{str(setting.flag): options[str(setting.flag)] for setting in FLAGGED},
        )

        def run() -> None:
            while True:
                try:
                    worker = Worker(backend, worker_options)
                    break
                except (ValueError, ConfigurationError) as exc:
                    raise CommandError(str(exc)) from None
                except redis.ResponseError as exc:  # QUEUES: [] and a registry it cannot read
                    raise CommandError(f"cannot read the queue registry: {exc}") from None
                except UNAVAILABLE as exc:
                    # The server away: a cluster client connects at once, and a
                    # backend with QUEUES: [] reads the registry.
                    logger.warning("%s; retrying in %gs", unreachable(exc), START_RETRY)
                    time.sleep(START_RETRY)
            worker.install_signal_handlers()
            try:
                worker.run()
            except ConfigurationError as exc:  # the server is not one it can serve
                raise CommandError(str(exc)) from None

        if options["reload"]:
            autoreload.run_with_reloader(run)
        else:
            run()
