"""The admin's lanes view: Django's autodiscovery imports this package, which
registers :class:`~django_emq.admin.lanes.LaneAdmin` for the unmanaged ``Lane``
model. The parts: ``lanes`` (the views), ``actions`` (lane control forms),
``display`` (formatting), ``lookup`` (users and owners behind lanes).
"""

from __future__ import annotations

from .jobs import JobAdmin
from .lanes import LaneAdmin

__all__ = ["JobAdmin", "LaneAdmin"]
