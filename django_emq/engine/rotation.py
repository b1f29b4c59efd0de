"""The order claims take several sources in, written once for the sync API
(the shards of a :class:`~django_emq.engine.shards.ShardedQueue`) and the
worker (its queues, and their shards).

A :class:`Rotation` does no I/O itself: it is handed ``ask``, the coroutine
that claims from one member (a runner's step), and tries the members in turn.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .exceptions import UNAVAILABLE

#: Seconds a member whose server did not answer is passed over by claims (a node
#: that is down can cost a connect timeout per try: the others go on).
HOLD_OFF = 1.0


class Rotation[M]:
    """Claims from ``members`` in turn, starting after the one that served last.

    A member with nothing to serve is passed over at once, and for
    ``empty_hold`` seconds after is tried only after the others (so a busy
    worker does not pay a script call per claim for a queue that is empty).
    One whose server cannot answer is passed over for :data:`HOLD_OFF` seconds:
    the others are served meanwhile, and its error is raised only when no
    member could answer. Not locked: threads sharing one rotation may skip a turn.
    """

    def __init__(self, members: Sequence[M], empty_hold: float = 0.0) -> None:
        self.members = tuple(members)
        self.empty_hold = empty_hold
        self._next = 0
        #: index -> (monotonic time to try it again, the error it answered)
        self._away: dict[int, tuple[float, Exception]] = {}
        #: index -> monotonic time until which it is taken for empty
        self._empty: dict[int, float] = {}

    def add(self, member: M) -> None:
        """Take ``member`` in turn too, after the others (a worker serving any
        queue name adds each queue the registry gains)."""
        self.members = (*self.members, member)

    def leaves(self) -> list[Any]:
        """Every member, a nested rotation's leaves in its place."""
        return [
            leaf
            for member in self.members
            for leaf in (member.leaves() if isinstance(member, Rotation) else [member])
        ]

    async def turn[F](self, ask: Callable[[M], Awaitable[F | None]]) -> F | None:
        """The next member in turn's answer to ``ask``; ``None`` when none has
        anything to serve. Raises the last error seen when no member could answer."""
        count = len(self.members)
        now = time.monotonic()
        order = [(self._next + step) % count for step in range(count)]
        fresh = [i for i in order if self._empty.get(i, 0.0) <= now]
        held = [i for i in order if i not in fresh]
        answered = False
        for index in fresh + held:  # the ones taken for empty last
            away = self._away.get(index)  # one lookup: another thread may pop it
            if away is not None and away[0] > now:
                continue
            try:
                found = await ask(self.members[index])
            except UNAVAILABLE as exc:
                if count == 1:  # nothing else to serve meanwhile: no hold-off
                    raise
                self._away[index] = (now + HOLD_OFF, exc)
                continue
            answered = True
            self._away.pop(index, None)
            if found is not None:
                self._empty.pop(index, None)
                self._next = (index + 1) % count
                return found
            if self.empty_hold:
                self._empty[index] = now + self.empty_hold
        errors = list(self._away.values())  # a copy: other threads may change it
        if not answered and errors:
            raise max(errors, key=lambda away: away[0])[1]
        return None
