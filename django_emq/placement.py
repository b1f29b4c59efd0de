"""Moved to :mod:`django_emq.engine.placement`; this path re-exports it for one release."""

from .engine.placement import *  # noqa: F403
