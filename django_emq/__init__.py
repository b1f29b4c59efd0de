"""django-emq: fair lanes for Django tasks on Valkey."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .ids import lane_id

if TYPE_CHECKING:
    from .queue import Queue

__all__ = ["get_queue", "lane_id"]


def get_queue(name: str = "default", **options: Any) -> Queue:
    """The queue ``name`` on the configured Valkey connection.

    ``connection=`` may be passed to use another client (tests, scripts).
    """
    from .connection import get_connection
    from .queue import Queue

    connection = options.pop("connection", None) or get_connection()
    return Queue(name, connection=connection, **options)
