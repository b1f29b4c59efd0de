"""The worker's log lines: one record per job, built only when it is emitted.

``run_emq_worker`` logs to the ``django_emq.worker`` logger: a line per job at
INFO (``lane``, ``job``, ``task``, ``attempt``, ``duration``, ``outcome``
last; a retry or a dead job names its ``error`` too, at WARNING or ERROR, and a
dead job's line carries the failure's traceback, printed under it), a summary
every minute. Django's own per-job lines (``django.tasks``: started and
finished, from its task signals' receivers) stay connected (Django's task
contract, tested in ``tests/contract``); ``run_emq_worker`` shows them from
``-v 2`` on when the project's ``LOGGING`` leaves output to it.

A job's line is cheap: its record is made directly (no search of the stack
for the caller), and when the worker prints through a handler of its own
(:class:`LineHandler`: the project's ``LOGGING`` gives the root logger none),
the lines of a batch of jobs are written together (:func:`batch`), with the
time formatted once a second (:class:`LineFormatter`). When that handler is
the only one a line reaches (no filter, no record factory of the project's
own: nothing else could see a record), the successes' lines of a batch skip
the records and are formatted straight into the text the handler would
write (:class:`Lines`), the same text, with one timestamp for the batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

from ..results import parse_error
from .jobs import Job

logger = logging.getLogger("django_emq.worker")

#: Level of a job's line for each outcome.
LEVELS = {
    "done": logging.INFO,
    "retry": logging.WARNING,
    "dead": logging.ERROR,
    "stale": logging.WARNING,
    "released": logging.INFO,
    "dropped": logging.WARNING,
    "expired": logging.WARNING,
}
LINE = "lane=%s job=%s task=%s attempt=%d duration=%.3fs outcome=%s"
#: The format of the worker's own handler (``run_emq_worker``'s, see :class:`LineHandler`).
FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
ERROR_LINE = "lane=%s job=%s task=%s attempt=%d duration=%.3fs error=%s outcome=%s"


def job_line(job: Job, outcome: str, reason: str | None = None) -> None:
    """Log ``job``'s one line (nothing is made unless the level is on)."""
    level = LEVELS.get(outcome, logging.INFO)
    if not logger.isEnabledFor(level):
        return
    c = job.claim
    args: tuple[Any, ...]
    if reason is None:
        msg, args = LINE, (c.lane, c.job_id, c.task_path, c.token, job.duration, outcome)
    else:
        msg = ERROR_LINE
        args = (c.lane, c.job_id, c.task_path, c.token, job.duration, reason, outcome)
    record = _record(level, msg, args)
    if job.error is not None:
        record.exc_text = _traceback(job.error)
    logger.handle(record)


def _traceback(error: str) -> str | None:
    """The traceback of a recorded failure (``task_error`` JSON), as a record's
    ``exc_text``: formatters print it under the line, as ``logger.exception``'s."""
    text = parse_error(error).traceback.rstrip()
    return text or None


def _record(level: int, msg: str, args: tuple[Any, ...]) -> logging.LogRecord:
    """A record as ``logger.log`` called from :func:`job_line` makes it, without
    the look-ups that are the same for every line of a thread (the caller, the
    thread, the process): a copy of the thread's first one, with this line's
    message and time. With a record factory of the project's own, the factory
    makes every record."""
    if logging.getLogRecordFactory() is not logging.LogRecord:
        return logger.makeRecord(logger.name, level, __file__, LINENO, msg, args, None, "job_line")
    proto = _protos.get(threading.get_ident())
    if proto is None:
        proto = logger.makeRecord(logger.name, level, __file__, LINENO, msg, args, None, "job_line")
        _protos[threading.get_ident()] = proto
    record = logging.LogRecord.__new__(logging.LogRecord)
    record.__dict__.update(proto.__dict__)
    record.msg, record.args = msg, args
    if level != proto.levelno:
        record.levelno, record.levelname = level, logging.getLevelName(level)
    now = time.time()
    record.created = now
    record.msecs = int((now - int(now)) * 1000) + 0.0
    record.relativeCreated = proto.relativeCreated + (now - proto.created) * 1000
    if getattr(logging, "logAsyncioTasks", False):
        record.taskName = _task_name()
    return record


def _task_name() -> str | None:
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop
        return None
    return task.get_name() if task is not None else None


#: One prototype record per thread (see :func:`_record`).
_protos: dict[int, logging.LogRecord] = {}
#: The line of :func:`job_line` that logs (what ``logger.log`` would record).
LINENO = job_line.__code__.co_firstlineno


class LineFormatter(logging.Formatter):
    """A formatter that formats a second's time once (``asctime`` of the default
    format, ``datefmt`` unset), for the thousands of lines a busy worker writes."""

    _second = -1
    _text = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        return self.asctime(record.created, record.msecs)

    def asctime(self, created: float, msecs: float | None = None) -> str:
        """``asctime`` of a record made at ``created`` (epoch seconds; ``msecs``
        as the record has them, else worked out as ``LogRecord`` does)."""
        second = int(created)
        if second != self._second:
            self._text = time.strftime(self.default_time_format, self.converter(created))
            self._second = second
        if msecs is None:
            msecs = int((created - second) * 1000) + 0.0
        return f"{self._text},{int(msecs):03d}"


_handlers: weakref.WeakSet[LineHandler] = weakref.WeakSet()


class LineHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler that, inside :func:`batch`, writes the lines of the batch
    in one go at its end (a line at WARNING or above is written at once, with
    those before it)."""

    def __init__(self) -> None:
        super().__init__()
        self._held: list[str] | None = None
        _handlers.add(self)

    def emit(self, record: logging.LogRecord) -> None:
        held = self._held
        if held is None or record.levelno >= logging.WARNING:
            self.write_held()
            super().emit(record)
            return
        try:
            held.append(self.format(record) + self.terminator)
        except Exception:
            self.handleError(record)

    def add_text(self, text: str) -> None:
        """A line already formatted (:class:`Lines`): held inside :func:`batch`,
        else written at once."""
        with self.lock:  # type: ignore[union-attr]
            if self._held is not None:
                self._held.append(text)
            else:
                self._write(text)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.flush()
        except Exception:  # as StreamHandler.emit: a broken stream never stops the worker
            self.handleError(logging.makeLogRecord({"msg": text}))

    def hold_lines(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            if self._held is None:
                self._held = []

    def write_held(self) -> None:
        """Write what is held (and stop holding). (Not ``release``: that one
        is the handler's lock's.)"""
        with self.lock:  # type: ignore[union-attr]
            held, self._held = self._held, None
            if held:
                self._write("".join(held))


@contextlib.contextmanager
def batch() -> Iterator[Lines]:
    """Lines logged inside are written together at the end, by the worker's own
    handlers (the project's handlers write theirs as they always do); the
    :class:`Lines` given write the batch's job lines."""
    handlers = list(_handlers)
    for handler in handlers:
        handler.hold_lines()
    lines = Lines()
    try:
        yield lines
    finally:
        lines.flush()
        for handler in handlers:
            handler.write_held()


class Lines:
    """The job lines of one batch (see :func:`batch`). Whether a success's line
    shows, and where it goes, is looked at once for the batch: when the
    worker's own handler is the only one it reaches, the line is formatted
    straight into that handler's text (no record: nothing else could see one);
    every other line is :func:`job_line`'s."""

    def __init__(self) -> None:
        self.info = logger.isEnabledFor(logging.INFO)
        self._direct = _sole_handler() if self.info else None
        self._head = ""
        #: Lines formatted and not handed to the handler yet (in order).
        self._texts: list[str] = []
        if self._direct is not None:
            formatter = self._direct.formatter
            assert isinstance(formatter, LineFormatter)
            name = logging.getLevelName(logging.INFO)
            self._head = f"{formatter.asctime(time.time())} {name} {logger.name} "

    def write(self, job: Job, outcome: str, reason: str | None = None) -> None:
        """``job``'s one line, as :func:`job_line` writes it."""
        direct = self._direct
        if direct is None or outcome != "done" or reason is not None or job.error is not None:
            if self.info or outcome != "done":  # a success's line is at INFO
                self.flush()  # the lines before it first
                job_line(job, outcome, reason)
            return
        c = job.claim
        message = LINE % (c.lane, c.job_id, c.task_path, c.token, job.duration, outcome)
        self._texts.append(f"{self._head}{message}{direct.terminator}")

    def flush(self) -> None:
        """Hand the lines formatted so far to the handler."""
        if self._texts:
            assert self._direct is not None
            self._direct.add_text("".join(self._texts))
            self._texts.clear()


def _sole_handler() -> LineHandler | None:
    """The worker's own :class:`LineHandler` when a line at INFO of ``logger``
    reaches it and nothing else: no other handler takes it, no filter looks at
    it, records are made by ``logging.LogRecord`` and the handler formats them
    with a plain :class:`LineFormatter` of :data:`FORMAT`. ``None`` otherwise."""
    if logger.filters or logging.getLogRecordFactory() is not logging.LogRecord:
        return None
    found: LineHandler | None = None
    node: logging.Logger | None = logger
    while node is not None:
        for handler in node.handlers:
            if handler.level > logging.INFO:
                continue
            formatter = handler.formatter
            if (
                found is not None
                or type(handler) is not LineHandler
                or handler.filters
                or type(formatter) is not LineFormatter
                or formatter._fmt != FORMAT
                or formatter.datefmt is not None
            ):
                return None
            found = handler
        node = node.parent if node.propagate else None
    return found
