"""django-emq: fair lanes for Django tasks on Valkey.

The public names are imported lazily (PEP 562), so ``import django_emq``
has no side effects and works before Django's app registry is ready.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine import AnyQueue, lane_id
    from .jobs import cancel, cancel_requested, progress, report_progress
    from .lanes import enqueue_for, enqueue_on_commit, lane, lane_for, tenant, unique

__all__ = [
    "cancel",
    "cancel_requested",
    "enqueue_for",
    "enqueue_on_commit",
    "get_queue",
    "lane",
    "lane_for",
    "lane_id",
    "progress",
    "report_progress",
    "tenant",
    "unique",
]

_LAZY = {
    "lane_id": "engine",
    "enqueue_for": "lanes",
    "enqueue_on_commit": "lanes",
    "lane": "lanes",
    "lane_for": "lanes",
    "unique": "lanes",
    "tenant": "lanes",
    "cancel": "jobs",
    "cancel_requested": "jobs",
    "progress": "jobs",
    "report_progress": "jobs",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'django_emq' has no attribute {name!r}")


def get_queue(name: str = "default", **options: Any) -> AnyQueue:
    """The engine queue ``name`` on the configured Valkey connection: a
    ``django_emq.engine.ShardedQueue`` when ``EMQ["SHARDS"]`` shards it,
    else a ``django_emq.engine.Queue`` (both answer the same calls, but for
    the worker's ``*_then_claim`` pairs, which only a plain queue has).

    Defaults come from the ``EMQ`` settings; ``connection=`` may be passed to
    use another client (tests, scripts); other options go to the queue.
    """
    from .conf import emq_settings
    from .connection import get_connection
    from .engine import open_queue

    s = emq_settings()
    connection = options.pop("connection", None) or get_connection()
    options = {**s.queue_options(name), **options}
    return open_queue(name, connection=connection, shards=s.shards.get(name, 1), **options)
