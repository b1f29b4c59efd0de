"""The one-command demo: ``make demo``, or ``python -m example_project.demo``.

Sets the example site up and runs it, the way a developer would by hand:

1. ``manage.py migrate`` (SQLite under ``var/``);
2. ``manage.py demo_users``: the superuser and the players (idempotent);
3. the embedded Valkey under ``var/emq`` (unless ``EMQ_URL`` names a server);
4. ``manage.py run_emq_worker`` and ``manage.py runserver``, each in its own
   process group, their output in ``var/demo/*.log``;
5. ``manage.py flood`` once, so the fairness table is on screen;
6. then it waits, printing the URLs. Ctrl-C (or SIGTERM) stops the web
   server and the worker (SIGTERM, then SIGKILL after a grace period) and
   the embedded Valkey, if this run started it.

Run it again and it reuses what exists: the database, the accounts, the
Valkey data. ``--stop`` stops an embedded Valkey left running.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
MANAGE = ROOT / "manage.py"
#: How long a child gets to exit after SIGTERM before it is killed.
STOP_GRACE = 15.0
#: How long the web server and the worker get to come up.
START_TIMEOUT = 60.0


class Stop(Exception):
    """SIGINT or SIGTERM arrived: wind everything down."""


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def say(text: str = "") -> None:
    print(text, flush=True)


@dataclass
class Child:
    """A long-running process the demo started, in a process group of its own."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.process.poll() is None

    def terminate(self) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)

    def wait_or_kill(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            say(f"  {self.name} did not stop in {timeout:g}s: killing it")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            return self.process.wait()

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()[-lines:]
        except FileNotFoundError:
            return ""
        return "\n".join(f"    {line}" for line in text)


def manage(*args: str, quiet: bool = False) -> None:
    """Run ``manage.py <args>`` to completion (its output on ours unless ``quiet``)."""
    output: int | None = subprocess.PIPE if quiet else None
    result = subprocess.run(
        [sys.executable, str(MANAGE), *args],
        cwd=ROOT,
        stdout=output,
        stderr=subprocess.STDOUT if quiet else None,
        check=False,
    )
    if result.returncode != 0:
        if quiet and result.stdout:
            sys.stdout.write(result.stdout.decode(errors="replace"))
        raise SystemExit(f"manage.py {' '.join(args)} failed (exit {result.returncode})")


def start(name: str, args: Sequence[str], log: Path) -> Child:
    """Start ``manage.py <args>`` in its own session, output appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    handle: IO[bytes] = open(log, "ab")  # noqa: SIM115 - the child keeps it open
    handle.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(args)}\n".encode())
    handle.flush()
    process = subprocess.Popen(
        [sys.executable, str(MANAGE), *args],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # Ctrl-C reaches the demo only; it stops the children
    )
    handle.close()
    return Child(name, process, log)


def free_port(host: str, first: int, tries: int = 20) -> int:
    """The first port from ``first`` that ``host`` can listen on."""
    for port in range(first, first + tries):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError:
                continue
            return port
    raise SystemExit(f"no free port in {first}-{first + tries - 1} on {host}: pass --port")


def wait_until(what: str, ready: Callable[[], bool], children: Sequence[Child]) -> None:
    """Poll ``ready()`` until it is true; fail if a child dies or time runs out."""
    deadline = time.monotonic() + START_TIMEOUT
    while not ready():
        for child in children:
            if not child.alive():
                raise SystemExit(
                    f"the {child.name} exited (code {child.process.returncode}) while "
                    f"waiting for {what}; its log ({child.log}):\n{child.tail()}"
                )
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} did not happen within {START_TIMEOUT:g}s")
        time.sleep(0.1)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def redacted(url: str) -> str:
    """``url`` without its password, fit to print."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urllib.parse.urlunsplit(parts._replace(netloc=user + host))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m example_project.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address of the web server")
    parser.add_argument("--port", type=int, default=8000, help="first port to try (8000)")
    parser.add_argument("--flood", type=int, default=200, help="guesses the masher sends (200)")
    parser.add_argument("--players", type=int, default=4, help="players beside the masher (4)")
    parser.add_argument("--concurrency", type=int, default=2, help="worker threads (2)")
    parser.add_argument(
        "--stop", action="store_true", help="stop the embedded Valkey left running, and exit"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.tasks import task_backends
    from django.urls import NoReverseMatch, reverse

    from django_emq import embedded
    from django_emq.backend import FairLanesBackend
    from django_emq.conf import emq_settings
    from example_project.game.players import ADMIN, DEMO_PASSWORD, MASHER, PLAYERS

    conf = emq_settings()
    if args.stop:
        if conf.embedded and embedded.is_running(conf.embedded_dir):
            embedded.stop(conf.embedded_dir)
            say(f"stopped the embedded Valkey of {conf.embedded_dir}")
        else:
            say("no embedded Valkey running")
        return 0

    var = Path(getattr(settings, "VAR_DIR", ROOT / "var"))
    children: list[Child] = []
    started_valkey = False
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        say(f"django-emq demo (data under {var}; Ctrl-C stops everything)")
        say("- migrating the database")
        manage("migrate", "--noinput", "-v", "0")
        manage("demo_users")

        if conf.embedded:
            started_valkey = not embedded.is_running(conf.embedded_dir)
            url = embedded.ensure_running(conf.embedded_dir)
            state = "started" if started_valkey else "already running, reused"
            say(f"- Valkey (embedded): {url} ({state})")
        else:
            say(f"- Valkey: {redacted(conf.url or '')} (EMQ_URL; not managed by the demo)")

        worker = start(
            "worker",
            ["run_emq_worker", "--concurrency", str(args.concurrency), "--grace", "5"],
            var / "demo" / "worker.log",
        )
        children.append(worker)
        say(f"- worker: pid {worker.process.pid} (log {worker.log})")
        port = free_port(args.host, args.port)
        web = start(
            "web server",
            ["runserver", f"{args.host}:{port}", "--noreload"],
            var / "demo" / "web.log",
        )
        children.append(web)
        base = f"http://{args.host}:{port}"
        say(f"- web server: pid {web.process.pid} on {base}/ (log {web.log})")

        backend = task_backends["default"]
        assert isinstance(backend, FairLanesBackend)
        queue = backend.queue("default")
        worker_id = f"{socket.gethostname()}:{worker.process.pid}"
        wait_until(
            "the worker to report in",
            lambda: bool(queue.connection.hexists(queue.keys.workers, worker_id)),
            children,
        )
        wait_until("the web server to answer", lambda: answers(f"{base}/accounts/login/"), children)

        if args.flood > 0:
            say()
            say(f"- the flood: {MASHER} mashes {args.flood} guesses, the others send 3 each")
            manage(
                "flood",
                "--guesses",
                str(args.flood),
                "--players",
                str(args.players),
                "--slots",  # the FIFO line gets as many workers as the real one has
                str(args.concurrency),
            )

        try:  # the lanes view itself, not the app's index
            lanes = base + reverse("admin:django_emq_lane_changelist")
        except NoReverseMatch:  # the admin is not mounted
            lanes = f"{base}/admin/"
        say()
        say("The demo is running:")
        say(f"  the game         {base}/")
        say(f"                   sign in as {PLAYERS[0]} / {DEMO_PASSWORD}; {MASHER} is the masher")
        say(f"  the admin lanes  {lanes}")
        say(f"                   sign in as {ADMIN} / {DEMO_PASSWORD}")
        say(f"  logs             {worker.log}, {web.log}")
        say()
        say(
            "Sign in as mallory in one browser and press 'Mash x100', as alice in another "
            "(or a private window) and guess: alice's scores arrive in her turn."
        )
        python = Path(sys.executable)
        shown = python.relative_to(ROOT) if python.is_relative_to(ROOT) else python
        say(f"Run the flood again in another terminal: {shown} manage.py flood")
        say("Ctrl-C stops the web server, the worker and the Valkey the demo started.")
        while True:
            for child in children:
                if not child.alive():
                    say(f"the {child.name} exited (code {child.process.returncode}); its log:")
                    say(child.tail())
                    return 1
            time.sleep(0.5)
    except Stop as stop:
        say(f"\n{stop}: stopping")
        return 0
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # let the wind-down finish
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for child in reversed(children):
            child.terminate()
        for child in reversed(children):
            code = child.wait_or_kill(STOP_GRACE)
            how = f", exit {code}" if code > 0 else ""
            say(f"  stopped the {child.name} (pid {child.process.pid}{how})")
        if started_valkey:
            embedded.stop(conf.embedded_dir)
            say("  stopped the embedded Valkey")
        elif conf.embedded and embedded.is_running(conf.embedded_dir):
            say(
                "  the embedded Valkey was running before the demo: left running "
                "(python -m example_project.demo --stop stops it)"
            )


if __name__ == "__main__":
    sys.exit(main())
