"""Moved to :mod:`django_emq.engine.keys`; this path re-exports it for one release."""

from .engine.keys import *  # noqa: F403
