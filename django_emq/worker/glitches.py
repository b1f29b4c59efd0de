"""Riding out the unexpected in one round of a worker's duty."""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("django_emq.worker")

#: Unexpected errors in a row that stop a worker's duty (see :class:`Glitches`).
MAX_GLITCHES = 10


class Glitches:
    """Rides out an unexpected error in one round of a worker's duty (a client
    library that trips over a connection the server dropped mid-write, say):
    logged with its traceback, the duty goes on; :data:`MAX_GLITCHES` in a row
    are a bug, and stop the worker."""

    def __init__(self, duty: str) -> None:
        self.duty = duty
        self.in_a_row = 0

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is None:
            self.in_a_row = 0
            return False
        if not isinstance(exc, Exception):  # cancelled, exiting: not ours to swallow
            return False
        self.in_a_row += 1
        if self.in_a_row > MAX_GLITCHES:
            return False
        logger.warning("%s: unexpected error, will retry", self.duty, exc_info=exc)
        return True
