"""What each per-job structure of the hot path costs the Valkey server: the
drain of ``bench/server_cost.py`` (no policy configured), once as django-emq
runs it and once with each structure's commands cut out of a copy of the
Function library, beside the minimal fair-lanes script, in one run.

    .venv/bin/python bench/cost_levers.py                      # 1,000 lanes x 3 jobs, 3 rounds
    .venv/bin/python bench/cost_levers.py --lanes 10000 --rounds 1

A what-if, not a design: a cut copy is not a correct queue (without the lanes'
active sets a ceiling would never hold and the console would show no running
jobs; without the depth index's decrement the console's deepest lanes would
be wrong), and it only ever runs here, on a throwaway server, loaded under the
library's own name so the runner calls it as it calls the real one. It answers
one question: how close to the minimal script the hot path could come by
dropping these structures, before any of them is redesigned. The cuts:

- ``lane active sets``: the claim's ``ZADD`` of each job into its lane's
  active set and the completion's ``ZREM`` from it (the lane's in-flight count
  for ceilings, and its running jobs for the console and the doctor).
- ``depth index``: the claim's ``ZINCRBY`` of the lane's depth, replaced by a
  ``ZCARD`` of the lane (which still decides when the lane leaves the ring).
- ``finished row expiry``: the completion's ``PEXPIRE`` of a finished row
  (``RESULT_TTL``).
- ``history``: the ``record_history`` calls a worker makes every
  ``RECORD_EVERY`` seconds (the waits histograms, the finished window).

Each cut names the exact text of the library it replaces; when the scripts
change and a text is gone, the run stops and says which (update ``CUTS``).
Ratios are medians over the rounds (this machine is shared: one round's
ratio moves by about 10 %).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import NamedTuple

if __name__ == "__main__":  # run as a script: import this checkout's django_emq
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.server_cost import PER_LANE, emq_variant, lanes, minimal_variant, servers
from django_emq.engine.scripts import library


class Cut(NamedTuple):
    """One structure's commands: library texts and what each becomes."""

    name: str
    replace: tuple[tuple[str, str], ...]
    #: the cut also stops sending the history (a worker's, not a script's, part)
    history: bool = False


CUTS = (
    Cut(
        "lane active sets",
        (
            ("added = redis.pcall('ZADD', laneActive, now, popped[1])", "added = 1"),
            ("added = redis.pcall('ZADD', laneActive, unpack(mine))", "added = n"),
            (
                "local removed = redis.pcall('ZREM', laneActive, unpack(byLane[lane]))",
                "local removed = 0",
            ),
        ),
    ),
    Cut(
        "depth index",
        (
            (
                "local left = redis.pcall('ZINCRBY', C.depths, -n, lane)",
                "local left = redis.call('ZCARD', pendingKey)",
            ),
        ),
    ),
    Cut(
        "finished row expiry",
        (
            (
                "'result', argv[i + 2])\n      redis.call('PEXPIRE', jk, ttl)\n",
                "'result', argv[i + 2])\n",
            ),
        ),
    ),
    Cut("history", (), history=True),
)


def cut_source(cuts: tuple[Cut, ...]) -> str:
    """The library's source with ``cuts`` made; ``SystemExit`` naming a text the
    library no longer holds."""
    source = library().source
    for cut in cuts:
        for old, new in cut.replace:
            if old not in source:
                raise SystemExit(f"cut {cut.name!r}: the library no longer holds {old!r}")
            source = source.replace(old, new)
    return source


def measure(n_lanes: int, rounds: int) -> dict[tuple[int, str], list[tuple[float, float]]]:
    """(claim, variant) -> each round's (ratio to the minimal, server calls per job)."""
    variants: list[tuple[str, tuple[Cut, ...]]] = [("django-emq", ())]
    variants += [(f"- {cut.name}", (cut,)) for cut in CUTS]
    variants.append(("- all of the above", CUTS))
    found: dict[tuple[int, str], list[tuple[float, float]]] = {}
    with servers(1 + len(variants)) as clients:
        for _ in range(rounds):
            for claim in (16, 1):
                names = lanes(n_lanes)
                for client in clients:
                    client.flushall()
                running = [minimal_variant(clients[0], names, PER_LANE, claim)]
                for (name, cuts), client in zip(variants, clients[1:], strict=True):
                    history = not any(cut.history for cut in cuts)
                    variant = emq_variant(
                        name, client, names, PER_LANE, False, claim, history_on=history
                    )
                    client.function_load(cut_source(cuts), replace=True)
                    running.append(variant)
                drained = list(running)
                for variant in running:
                    variant.reset()
                while running:
                    running = [v for v in running if v.advance()]
                base = drained[0].cost()[0]
                for variant in drained:
                    us, _, calls = variant.cost()
                    found.setdefault((claim, variant.name), []).append((us / base, calls))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--lanes", type=int, default=1_000, help="how many lanes (3 jobs each)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (the median is printed)")
    args = parser.parse_args(argv)
    print(f"{args.lanes:,} lanes x {PER_LANE} jobs, no policy, {args.rounds} round(s)\n")
    print("| claim | variant | ratio to the minimal (median) | rounds | server calls/job |")
    print("|---:|---|---:|---|---:|")
    for (claim, name), rows in sorted(measure(args.lanes, args.rounds).items(), key=_order):
        ratios = ", ".join(f"{r:.2f}" for r, _ in rows)
        median = statistics.median(r for r, _ in rows)
        print(f"| {claim} | {name} | {median:.2f}x | {ratios} | {rows[0][1]:.1f} |")
    return 0


def _order(item: tuple[tuple[int, str], list[tuple[float, float]]]) -> tuple[int, int, str]:
    (claim, name), _ = item
    return (-claim, 0 if name == "minimal" else 1 if name == "django-emq" else 2, name)


if __name__ == "__main__":
    raise SystemExit(main())
