"""Moved to :mod:`django_emq.engine.payload`; this path re-exports it for one release."""

from .engine.payload import *  # noqa: F403
