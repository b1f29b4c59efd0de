"""``manage.py emq_doctor``: a thin shell over :class:`django_emq.engine.doctor.Doctor`.

Audits the keyspace of every queue of every ``FairLanesBackend`` (or the ones
named with ``--queue``) and, without ``--queue``, the registry of queue names
(``emq:queues``); with ``--repair`` mends what it finds. Exits 1 when
something is wrong (after a repair: when something is still wrong), so cron
or a monitoring check can run it.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

import redis
from django.core.management.base import BaseCommand, CommandError
from django.tasks import task_backends

from django_emq.backend import QUEUE_REGISTRY, FairLanesBackend
from django_emq.conf import emq_settings
from django_emq.connection import get_connection
from django_emq.engine.doctor import Doctor, Report
from django_emq.engine.doctor_registry import RegistryDoctor
from django_emq.engine.placement import shard_tags
from django_emq.engine.queue import Queue
from django_emq.engine.shards import shards_of


class Command(BaseCommand):
    help = (
        "Audit the keyspace of django-emq's queues against the engine's invariants "
        "(safe on a live queue); --repair mends what is wrong."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--queue",
            action="append",
            dest="queues",
            default=[],
            help="queue to check (repeatable; default: every queue of every FairLanesBackend)",
        )
        parser.add_argument(
            "--repair", action="store_true", help="mend what is wrong, then audit again"
        )
        parser.add_argument(
            "--batch",
            type=int,
            default=500,
            help="keys read per step (default 500): memory and the longest command scale with it",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self.verbosity = int(options["verbosity"])
        if options["batch"] < 1:
            raise CommandError("--batch must be >= 1")
        backends = [b for b in task_backends.all() if isinstance(b, FairLanesBackend)]
        if not backends:
            raise CommandError("no FairLanesBackend in TASKS")
        broken = 0
        if not options["queues"]:  # first: a broken registry hides queues to audit
            broken += self._registry(backends, options["batch"], options["repair"])
        queues = self._queues(backends, options["queues"])
        for name, backend in queues.items():
            for shard in shards_of(backend.engine(name)):
                doctor = Doctor(shard, batch=options["batch"], progress=self._progress)
                if options["repair"]:
                    found, after = doctor.repair()
                    self._show(found, "found")
                    self.stdout.write(f"{shard.name}: mended {found.mended} thing(s)")
                    self._show(after, "after the repair")
                else:
                    after = doctor.audit()
                    self._show(after, "found")
                broken += after.problems
        if broken:
            raise CommandError(f"{broken} problem(s) in the keyspace", returncode=1)

    def _queues(
        self, backends: list[FairLanesBackend], names: list[str]
    ) -> dict[str, FairLanesBackend]:
        found: dict[str, FairLanesBackend] = {}
        for backend in backends:
            try:
                served = backend.served_queues()
            except redis.ResponseError:  # QUEUES: [] and a registry of the wrong type
                continue  # reported by _registry
            for name in served:
                found.setdefault(name, backend)
        unknown = [name for name in names if name not in found]
        if unknown:
            raise CommandError(f"no such queue: {', '.join(unknown)} (known: {', '.join(found)})")
        return {name: found[name] for name in names} if names else found

    def _registry(self, backends: list[FairLanesBackend], batch: int, repair: bool) -> int:
        """Audit (or mend) the registry of queue names; the problems left."""
        any_queue = [b for b in backends if b.serves_any_queue]
        backend = (any_queue or backends)[0]

        def shards(name: str) -> tuple[Queue, ...]:
            return shards_of(backend.engine(name))

        tags = {
            tag: name
            for b in backends
            for name, count in emq_settings(b.alias).shards.items()
            for tag in shard_tags(name, count)
        }
        excluded = {name for b in backends for name in b.queues}
        doctor = RegistryDoctor(
            get_connection(), QUEUE_REGISTRY, shards, batch=batch, tags=tags, excluded=excluded
        )
        if repair:
            found, after = doctor.repair()
            self._show_registry(found, "found")
            self.stdout.write(f"{QUEUE_REGISTRY}: mended {found.mended} thing(s)")
            self._show_registry(after, "after the repair")
        else:
            after = doctor.audit()
            self._show_registry(after, "found")
        return after.problems

    def _show_registry(self, report: Report, label: str) -> None:
        self.stdout.write(
            f"{report.queue}: {report.keys} names; {label}: {report.problems} problem(s)"
        )
        for finding in report.findings:
            self.stdout.write(f"  {finding}")

    def _progress(self, report: Report) -> None:
        if self.verbosity >= 2:
            self.stderr.write(
                f"{report.queue}: {report.keys} keys, {report.jobs} jobs, "
                f"{report.lanes} lanes read; {report.problems} problem(s) so far"
            )

    def _show(self, report: Report, label: str) -> None:
        summary = (
            f"{report.queue}: {report.keys} keys, {report.jobs} jobs, {report.lanes} lanes; "
            f"{label}: {report.problems} problem(s)"
        )
        self.stdout.write(summary)
        for finding in report.findings:
            self.stdout.write(f"  {finding}")
        if report.problems > len(report.findings):
            self.stdout.write(f"  ... and {report.problems - len(report.findings)} more")
