"""Moved to :mod:`django_emq.engine.calls`; this path re-exports it for one release."""

from .engine.calls import *  # noqa: F403
