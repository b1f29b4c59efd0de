"""Moved to :mod:`django_emq.engine.shards`; this path re-exports it for one release."""

from .engine.shards import *  # noqa: F403
