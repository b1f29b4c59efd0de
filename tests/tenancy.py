"""A tenant source for ``EMQ["TENANT"]`` in the tests: a user's first group."""

from __future__ import annotations

from typing import Any


def first_group(user: Any) -> Any:
    """The user's first group (by pk), or ``None``."""
    return user.groups.order_by("pk").first()
