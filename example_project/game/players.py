"""The demo's cast: one player who mashes the button, a few who play normally."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

#: The player who floods the queue.
MASHER = "mallory"
#: The players who send a few guesses each (more are named player5, player6, ...).
PLAYERS = ("alice", "bob", "carol", "dave")
#: The demo's superuser.
ADMIN = "admin"
#: The password of every demo account (development only; printed by the demo).
DEMO_PASSWORD = "emq-demo"


def player_names(count: int) -> list[str]:
    """The names of ``count`` ordinary players."""
    return [PLAYERS[i] if i < len(PLAYERS) else f"player{i + 1}" for i in range(count)]


def ensure_user(
    username: str, *, password: str | None, superuser: bool = False
) -> tuple[Any, bool]:
    """Get or create ``username``; a new account gets ``password`` (or none usable).

    An existing account is left as it is (its password too): idempotent.
    """
    model = get_user_model()
    lookup: dict[str, Any] = {model.USERNAME_FIELD: username}
    user, created = model._default_manager.get_or_create(**lookup)
    if created:
        if password is None:
            user.set_unusable_password()
        else:
            user.set_password(password)
        user.is_staff = user.is_superuser = superuser
        user.save()
    return user, created
