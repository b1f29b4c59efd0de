"""``manage.py emq_valkey_status``: whether the embedded Valkey server runs,
where (its folder, socket and pid), and its memory. Exits 1 when none runs,
so a script can ask."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from django_emq import embedded
from django_emq.management.valkey import add_dir_argument, embedded_dir, size


class Command(BaseCommand):
    help = (
        "Say whether the embedded Valkey server runs, where (folder, socket, pid) "
        "and how much memory it holds; exit 1 when none runs."
    )
    #: The server is asked about whatever the rest of the settings say (a check
    #: failing for want of a URL must not hide the server that runs).
    requires_system_checks: list[str] = []  # noqa: RUF012 (Django reads it as declared)

    def add_arguments(self, parser: ArgumentParser) -> None:
        add_dir_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        directory = embedded_dir(options, "watch")
        found = embedded.status(directory)
        if found is None:
            self.stdout.write(
                f"no embedded Valkey server runs under {directory} "
                "(the first process that connects starts it)"
            )
            raise SystemExit(1)
        lines = [
            f"the embedded Valkey server runs (Valkey {found.version}, up {found.uptime_seconds}s)",
            f"  folder  {found.directory}",
            f"  socket  {found.socket} (unix socket only: no TCP port)",
            f"  pid     {found.pid}",
            f"  memory  {size(found.memory_bytes)} of data, {size(found.rss_bytes)} resident, "
            f"peak {size(found.peak_bytes)}",
            f"  keys    {found.keys}",
            f"  clients {found.other_clients} connected (workers, web servers, shells)",
        ]
        self.stdout.write("\n".join(lines))
