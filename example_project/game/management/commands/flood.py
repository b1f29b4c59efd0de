"""``manage.py flood``: one player mashes N guesses, a few others play normally.

When every guess is scored it prints, per player, how long their jobs waited
from enqueue to start with fair lanes (measured, from the jobs' results), and
what one shared first-in-first-out line would have given for the same
arrivals (simulated from the measured service times).
"""

from __future__ import annotations

import random
import time
from argparse import ArgumentParser
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.tasks import TaskResultStatus

from django_emq.backend import FairLanesBackend

from ...flood import Job, duration, max_overlap, rows, simulate_fifo, table
from ...models import Guess
from ...players import MASHER, ensure_user, player_names
from ...scoring import CODE_LENGTH
from ...services import submit_guess
from ...tasks import score_guess


def _code() -> str:
    return "".join(random.choice("0123456789") for _ in range(CODE_LENGTH))


class Command(BaseCommand):
    help = (
        "Flood the queue: one player mashes N guesses, others send a few; print each "
        "player's waits with fair lanes beside one shared FIFO line."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "-n", "--guesses", type=int, default=200, help="guesses the masher sends (200)"
        )
        parser.add_argument(
            "--players", type=int, default=4, help="players who send a few guesses (4)"
        )
        parser.add_argument("--few", type=int, default=3, help="guesses each of them sends (3)")
        parser.add_argument(
            "--run-worker",
            action="store_true",
            help="score in this process with a burst worker (run_emq_worker --burst) "
            "instead of waiting for running workers",
        )
        parser.add_argument(
            "--concurrency", type=int, default=1, help="threads of the --run-worker worker (1)"
        )
        parser.add_argument(
            "--slots",
            type=int,
            default=None,
            help="workers of the simulated FIFO line (default: --concurrency with "
            "--run-worker, else the most jobs seen running at once)",
        )
        parser.add_argument(
            "--timeout", type=float, default=600.0, help="seconds to wait for the scores (600)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        for name in ("guesses", "players", "few"):
            if options[name] < 0:
                raise CommandError(f"--{name} must not be negative")
        if options["concurrency"] < 1:
            raise CommandError("--concurrency must be at least 1")
        backend = score_guess.get_backend()
        if not isinstance(backend, FairLanesBackend):
            raise CommandError("the default TASKS backend is not django-emq's FairLanesBackend")

        masher, _ = ensure_user(MASHER, password=None)
        names = player_names(options["players"])
        others = [ensure_user(name, password=None)[0] for name in names]
        sent: list[Guess] = [submit_guess(masher, _code()) for _ in range(options["guesses"])]
        for player in others:
            sent += [submit_guess(player, _code()) for _ in range(options["few"])]
        total = len(sent)
        others_line = f", then {', '.join(names)} sent {options['few']} each" if names else ""
        self.stdout.write(
            f"{MASHER} mashed {options['guesses']} guesses{others_line}: {total} jobs."
        )

        if options["run_worker"]:
            call_command(
                "run_emq_worker",
                "--burst",
                "--concurrency",
                str(options["concurrency"]),
                verbosity=0,
            )
        elif not (queue := backend.queue(score_guess.queue_name)).connection.hlen(
            queue.keys.workers
        ):
            self.stdout.write(
                "No worker has reported in yet: start one (python manage.py run_emq_worker) "
                "or pass --run-worker."
            )
        self._wait(backend, sent, options["timeout"])

        jobs = self._measure(backend, sent)
        # The FIFO line gets the workers' real concurrency: the burst worker's, or
        # the demo's (it passes --slots). Inferring it from overlapping start and
        # finish stamps overstates it (a prefetched claim's jobs share a start).
        slots = options["slots"] or (
            options["concurrency"] if options["run_worker"] else max_overlap(jobs)
        )
        fifo = simulate_fifo(sorted(jobs, key=lambda j: j.enqueued), slots)
        players = [MASHER, *names]
        fair_rows, fifo_rows = rows(jobs, players), rows(fifo, players)
        self.stdout.write("")
        self.stdout.write(
            f"Wait from enqueue to start, per player. Fair lanes: measured. One FIFO line: "
            f"the same arrivals and service times, {slots} slot{'s' if slots != 1 else ''}."
        )
        for line in table(fair_rows, fifo_rows, total):
            self.stdout.write(line)
        small = [r for r in fair_rows if r.player != MASHER]
        small_fifo = [r for r in fifo_rows if r.player != MASHER]
        if small:
            self.stdout.write("")
            self.stdout.write(
                f"The others' worst wait: {duration(max(r.worst for r in small))} with fair "
                f"lanes, {duration(max(r.worst for r in small_fifo))} in one FIFO line."
            )

    def _wait(self, backend: FairLanesBackend, sent: list[Guess], timeout: float) -> None:
        """Wait until every guess is scored and its job's outcome is recorded (a
        worker records a short job's success with its next claim, a moment
        after the task wrote its score); a job that failed for good is an error."""
        ids = [g.pk for g in sent]
        deadline = time.monotonic() + timeout
        reported = time.monotonic()
        while True:
            scored = Guess.objects.filter(pk__in=ids, scored_at__isnull=False).count()
            if scored == len(ids) and all(
                backend.get_result(guess.job_id).is_finished for guess in sent
            ):
                return
            if time.monotonic() - reported >= 2:
                reported = time.monotonic()
                self.stdout.write(f"  {scored} of {len(ids)} scored ...")
                for guess in Guess.objects.filter(pk__in=ids, scored_at__isnull=True):
                    if backend.get_result(guess.job_id).status == TaskResultStatus.FAILED:
                        raise CommandError(f"scoring guess {guess.pk} failed: see its job")
            if time.monotonic() > deadline:
                raise CommandError(
                    f"{len(ids) - scored} of {len(ids)} guesses are still unscored after "
                    f"{timeout:g}s: is a worker running? (manage.py run_emq_worker)"
                )
            time.sleep(0.05)

    def _measure(self, backend: FairLanesBackend, sent: list[Guess]) -> list[Job]:
        """Each job's enqueue, start and finish, from its result (the server's clock)."""
        jobs = []
        for guess in sent:
            result = backend.get_result(guess.job_id)
            if (
                result.enqueued_at is None
                or result.started_at is None
                or result.finished_at is None
            ):
                raise CommandError(f"job {guess.job_id} has no start or finish time")
            jobs.append(
                Job(
                    player=guess.player.get_username(),
                    enqueued=result.enqueued_at.timestamp(),
                    started=result.started_at.timestamp(),
                    finished=result.finished_at.timestamp(),
                )
            )
        return jobs
