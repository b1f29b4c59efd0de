"""Moved to :mod:`django_emq.engine.scripts`; this path re-exports it for one release."""

from .engine.scripts import *  # noqa: F403
