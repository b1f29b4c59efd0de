"""How the admin shows engine values: moments, durations, errors, pages.

Moments become aware datetimes, which templates render in the site's time
zone; durations and labels go through gettext so they are translatable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

# A worker whose last beat is older than ALIVE_MS is shown as gone: the
# engine's window, in which a worker may be asked to stop.
from ..engine.worker_control import ALIVE_MS

# One owner of moments and of the task-error record: django_emq.results.
from ..results import error_parts as split_error
from ..results import moment

__all__ = ["Pager", "cut_traceback", "duration", "error_message", "moment", "short_duration",
           "split_error", "state_word", "worker_alive"]  # fmt: skip

#: Characters of a traceback a page shows (a row may hold megabytes).
TRACEBACK_SHOWN = 20_000


#: A job's state as every page words it: the engine's ``active`` is "running"
#: (never "in flight" or "active"), so the console says one thing one way.
STATE_WORDS = {
    "pending": gettext_lazy("pending"),
    "scheduled": gettext_lazy("scheduled"),
    "active": gettext_lazy("running"),
    "done": gettext_lazy("done"),
    "failed": gettext_lazy("failed"),
    "dead": gettext_lazy("dead"),
    "cancelled": gettext_lazy("cancelled"),
}


def state_word(state: str) -> str:
    """``state`` (the engine's word) as the console shows it."""
    return str(STATE_WORDS.get(state, state))


def worker_alive(beat_ms: int | None, server_ms: int) -> bool:
    """Whether a worker that last beat at ``beat_ms`` (server ms) counts as alive."""
    return bool(beat_ms) and server_ms - (beat_ms or 0) <= ALIVE_MS


def error_message(error_class: str, traceback: str) -> str:
    """The last line of a traceback without the exception class it starts with
    (the admin shows the class beside it): ``boom`` for ``ValueError: boom``."""
    lines = traceback.strip().splitlines()
    last = lines[-1] if lines else ""
    for name in (error_class, error_class.rpartition(".")[2]):
        if name and last == name:
            return ""
        if name and last.startswith(f"{name}: "):
            return last[len(name) + 2 :]
    return last


def cut_traceback(traceback: str) -> str:
    """A long traceback's head and tail (its end says what was raised), what
    lies between left out: at most about :data:`TRACEBACK_SHOWN` characters."""
    if len(traceback) <= TRACEBACK_SHOWN:
        return traceback
    head = TRACEBACK_SHOWN // 5
    tail = TRACEBACK_SHOWN - head
    marker = _("… %(count)d characters left out …") % {"count": len(traceback) - head - tail}
    return f"{traceback[:head]}\n{marker}\n{traceback[-tail:]}"


def duration(ms: int) -> str:
    """A short, translatable length of time: ``4 s``, ``3 min 4 s``, ``2 h 5 min``, ``3 d 4 h``."""
    seconds = max(0, ms) // 1000
    minutes, s = divmod(seconds, 60)
    hours, m = divmod(minutes, 60)
    days, h = divmod(hours, 24)
    if days:
        return _("%(days)d d %(hours)d h") % {"days": days, "hours": h}
    if hours:
        return _("%(hours)d h %(minutes)d min") % {"hours": hours, "minutes": m}
    if minutes:
        return _("%(minutes)d min %(seconds)d s") % {"minutes": minutes, "seconds": s}
    return _("%(seconds)d s") % {"seconds": s}


def short_duration(ms: int) -> str:
    """:func:`duration` for short things too: ``50 ms``, ``2.5 s``, then as
    :func:`duration` from a minute on."""
    ms = max(0, ms)
    if ms < 1000:
        return _("%(ms)d ms") % {"ms": ms}
    if ms < 60_000:
        return _("%(seconds).1f s") % {"seconds": ms / 1000}
    return duration(ms)


@dataclass(frozen=True, slots=True)
class Pager:
    """Page ``number`` (1-based) of ``total`` items, ``per_page`` a page."""

    number: int
    total: int
    per_page: int

    #: The highest page number asked for that is read as asked (a page past
    #: the last one is empty; a number past this one would overflow Valkey's
    #: ranks, so it reads as this one).
    MOST: ClassVar[int] = 1_000_000

    @classmethod
    def requested(cls, raw: str | None) -> int:
        """The page number a query parameter asks for (1 when it is not one, at
        most :attr:`MOST`)."""
        try:
            return min(cls.MOST, max(1, int(raw or "1")))
        except ValueError:
            return 1

    @classmethod
    def of(cls, raw: str | None, total: int, per_page: int) -> Pager:
        """The page a query parameter asks for, clamped to the pages there are."""
        pages = max(1, -(-total // per_page))
        return cls(min(cls.requested(raw), pages), total, per_page)

    @property
    def offset(self) -> int:
        return (self.number - 1) * self.per_page

    @property
    def num_pages(self) -> int:
        return max(1, -(-self.total // self.per_page))

    @property
    def previous(self) -> int | None:
        return self.number - 1 if self.number > 1 else None

    @property
    def next(self) -> int | None:
        return self.number + 1 if self.number < self.num_pages else None
