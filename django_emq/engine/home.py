"""What the parts of a queue written once for a plain and a sharded queue
(:mod:`.api`, :mod:`.policies`, :mod:`.tenants`) need of the plain queue a
call lands on: its shape, its runner and its client. A protocol, so those
parts never import :mod:`.queue` (which builds on them)."""

from __future__ import annotations

from typing import Protocol

from .client import Client
from .ops import QueueShape
from .runner import SyncRunner


class Home(QueueShape, Protocol):
    """A plain queue, as the calls that route to one see it."""

    name: str
    connection: Client
    runner: SyncRunner
