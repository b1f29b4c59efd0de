"""Moved to :mod:`django_emq.engine.browse`; this path re-exports it for one release."""

from .engine.browse import *  # noqa: F403
