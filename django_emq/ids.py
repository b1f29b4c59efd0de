"""Moved to :mod:`django_emq.engine.ids`; this path re-exports it for one release."""

from .engine.ids import *  # noqa: F403
