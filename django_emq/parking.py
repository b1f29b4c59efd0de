"""Moved to :mod:`django_emq.engine.parking`; this path re-exports it for one release."""

from .engine.parking import *  # noqa: F403
