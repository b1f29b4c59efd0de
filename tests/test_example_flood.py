"""``manage.py flood``: its table, and the arithmetic behind the FIFO column."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError

from example_project.game.flood import Job, max_overlap, rows, simulate_fifo
from example_project.game.models import Guess


@dataclass(frozen=True)
class Side:
    """One side of a printed row: fair lanes or one FIFO line."""

    median: str
    worst: str
    last_start: int
    total: int


def parse_table(output: str) -> dict[str, tuple[int, Side, Side]]:
    """``player -> (jobs, fair, fifo)`` from the printed table."""
    table: dict[str, tuple[int, Side, Side]] = {}
    for line in output.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != 3 or not parts[0] or parts[0].split()[-1] == "jobs":
            continue
        name, jobs = parts[0].split()
        sides = []
        for cell in parts[1:]:
            words = cell.split()  # "12 ms 30 ms 10 of 212" or "1.20 s ..."
            sides.append(
                Side(
                    median=" ".join(words[0:2]),
                    worst=" ".join(words[2:4]),
                    last_start=int(words[4]),
                    total=int(words[6]),
                )
            )
        table[name] = (int(jobs), sides[0], sides[1])
    return table


def job(player: str, enqueued: float, service: float, started: float = 0.0) -> Job:
    return Job(player, enqueued, started, started + service)


def test_fifo_line_serves_in_enqueue_order_one_slot() -> None:
    jobs = [job("m", 0.0, 1.0), job("m", 0.0, 1.0), job("a", 0.5, 1.0)]
    served = simulate_fifo(jobs, slots=1)
    assert [j.started for j in served] == [0.0, 1.0, 2.0]
    assert [j.wait for j in served] == [0.0, 1.0, 1.5]


def test_fifo_line_with_two_slots_takes_the_first_free_one() -> None:
    jobs = [job("m", 0.0, 3.0), job("m", 0.0, 1.0), job("a", 0.0, 1.0)]
    served = simulate_fifo(jobs, slots=2)
    assert [j.started for j in served] == [0.0, 0.0, 1.0]


def test_fifo_line_opens_when_the_real_workers_started() -> None:
    jobs = [job("m", 0.0, 1.0, started=5.0), job("a", 1.0, 1.0, started=6.0)]
    assert [j.started for j in simulate_fifo(jobs, slots=1)] == [5.0, 6.0]


def test_max_overlap_counts_jobs_running_at_once() -> None:
    jobs = [
        Job("m", 0, 0, 2),
        Job("m", 0, 1, 3),
        Job("m", 0, 2, 4),  # starts as the first ends: two at once, not three
    ]
    assert max_overlap(jobs) == 2
    assert max_overlap([]) == 1


def test_rows_rank_each_players_last_start() -> None:
    jobs = [Job("m", 0, 0, 1), Job("m", 0, 1, 2), Job("a", 0.5, 2, 3)]
    fair = {r.player: r for r in rows(jobs, ["m", "a"])}
    assert (fair["m"].jobs, fair["m"].last_start, fair["m"].worst) == (2, 2, 1)
    assert (fair["a"].jobs, fair["a"].last_start, fair["a"].median) == (1, 3, 1.5)


@pytest.mark.django_db(transaction=True)
def test_flood_table_shows_small_players_served_before_the_flood_drains(
    emq: redis.Redis, settings: Any
) -> None:
    settings.GAME_SCORING_SECONDS = 0.002
    out = io.StringIO()
    call_command(
        "flood", "--guesses", "60", "--players", "3", "--few", "2", "--run-worker", stdout=out
    )
    output = out.getvalue()
    table = parse_table(output)
    assert list(table) == ["mallory", "alice", "bob", "carol"]
    total = 60 + 3 * 2
    assert Guess.objects.filter(scored_at__isnull=False).count() == total

    jobs, fair, fifo = table["mallory"]
    assert jobs == 60
    assert fair.total == fifo.total == total
    assert fair.last_start == total  # the flood drains last
    for name in ("alice", "bob", "carol"):
        jobs, fair, fifo = table[name]
        assert jobs == 2
        # Fair lanes: one job per lane per turn of the ring, so two turns of
        # four lanes serve every small player's two guesses. A start time is
        # its claim's, and a claim may take a few turns at once (prefetch):
        # jobs claimed together tie, so allow one more turn.
        assert fair.last_start <= 3 * 4
        # One FIFO line: they arrived after the flood, so they start after it.
        assert fifo.last_start > 60
    assert "The others' worst wait:" in output
    # The FIFO line has the burst worker's real concurrency (1 thread), not a guess.
    assert "the same arrivals and service times, 1 slot." in output


@pytest.mark.django_db(transaction=True)
def test_flood_fifo_line_gets_the_workers_concurrency(emq: redis.Redis, settings: Any) -> None:
    settings.GAME_SCORING_SECONDS = 0.002
    out = io.StringIO()
    call_command(
        "flood",
        "--guesses",
        "8",
        "--players",
        "1",
        "--run-worker",
        "--concurrency",
        "2",
        stdout=out,
    )
    assert "the same arrivals and service times, 2 slots." in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_flood_without_a_worker_gives_up_after_its_timeout(emq: redis.Redis) -> None:
    out = io.StringIO()
    with pytest.raises(CommandError, match="still unscored"):
        call_command("flood", "--guesses", "2", "--players", "0", "--timeout", "0.2", stdout=out)
    assert "No worker has reported in yet" in out.getvalue()
