"""``manage.py emq_valkey_stop``: shut the embedded Valkey server down (its
append-only file flushed first). The server is daemonized, so it outlives the
workers and web servers that started it; this is how it ends."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from django_emq import embedded
from django_emq.management.valkey import add_dir_argument, embedded_dir


class Command(BaseCommand):
    help = (
        "Stop the embedded Valkey server (its data is kept on disk; the next "
        "process that connects starts it again)."
    )
    #: The server is asked about whatever the rest of the settings say (a check
    #: failing for want of a URL must not hide the server that runs).
    requires_system_checks: list[str] = []  # noqa: RUF012 (Django reads it as declared)

    def add_arguments(self, parser: ArgumentParser) -> None:
        add_dir_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        directory = embedded_dir(options, "stop")
        found = embedded.status(directory)
        if found is None:
            self.stdout.write(f"no embedded Valkey server runs under {directory}: nothing to stop")
            return
        embedded.stop(directory)
        self.stdout.write(f"stopped the embedded Valkey server under {directory} (pid {found.pid})")
        if found.other_clients:
            self.stdout.write(
                f"{found.other_clients} client(s) were connected: their calls fail until "
                "the server runs again (the next process of the project that starts, "
                "a worker or runserver, starts it)"
            )
