"""Moved to :mod:`django_emq.engine.queue`; this path re-exports it for one release."""

from .engine.queue import *  # noqa: F403
