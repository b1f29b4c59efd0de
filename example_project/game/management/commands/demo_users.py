"""``manage.py demo_users``: the demo's superuser and players, idempotently."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from ...players import ADMIN, DEMO_PASSWORD, MASHER, ensure_user, player_names


class Command(BaseCommand):
    help = "Create the demo superuser and players (existing accounts are left alone)."

    def handle(self, *args: Any, **options: Any) -> None:
        rows = [(ADMIN, True), (MASHER, False)] + [(n, False) for n in player_names(4)]
        self.stdout.write(f"Demo accounts (password of new accounts: {DEMO_PASSWORD}):")
        for name, superuser in rows:
            _, created = ensure_user(name, password=DEMO_PASSWORD, superuser=superuser)
            role = "superuser" if superuser else "player"
            note = "created" if created else "exists, left as it was"
            self.stdout.write(f"  {name:<10} {DEMO_PASSWORD:<10} {role:<10} ({note})")
