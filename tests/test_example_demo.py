"""The demo stack, started the way ``make demo`` starts it: a guess made through
the web page is scored by the worker, and SIGINT stops every process."""

from __future__ import annotations

import http.cookiejar
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from django_emq import embedded
from tests.helpers import free_port

ROOT = Path(__file__).resolve().parent.parent
#: Longest wait for the demo to come up (it migrates a new database first).
START_TIMEOUT = 120.0


class Demo:
    """The launcher process and its output, read line by line on a thread."""

    def __init__(self, var: Path, port: int) -> None:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in {"DJANGO_SETTINGS_MODULE", "EMQ_URL", "DATABASE_URL", "ALLOWED_HOSTS"}
        }
        env.update(
            DJANGO_SETTINGS_MODULE="example_project.settings",
            DEBUG="on",  # development: the embedded Valkey
            VAR_DIR=str(var),
            GAME_SCORING_SECONDS="0.001",
            PYTHONPATH=str(ROOT),
            PYTHONUNBUFFERED="1",
        )
        self.var = var
        options = ["--port", str(port), "--flood", "10", "--players", "2", "--concurrency", "1"]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "example_project.demo", *options],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, pattern: str, timeout: float = START_TIMEOUT) -> re.Match[str]:
        """The first line (from here on) matching ``pattern``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {pattern!r} in time; output:\n{self.output}") from None
            if line is None:
                raise AssertionError(f"the demo exited before {pattern!r}; output:\n{self.output}")
            self.seen.append(line)
            found = re.search(pattern, line)
            if found:
                return found

    def rest(self, timeout: float) -> None:
        """Collect the output until the process closes it."""
        deadline = time.monotonic() + timeout
        while (line := self.lines.get(timeout=max(0.0, deadline - time.monotonic()))) is not None:
            self.seen.append(line)

    @property
    def output(self) -> str:
        return "\n".join(self.seen)


class Browser:
    """Just enough of a browser: cookies, and the CSRF token from the pages."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def get(self, path: str) -> str:
        with self.opener.open(self.base + path, timeout=10) as answer:
            return str(answer.read().decode())

    def post_form(self, path: str, page: str, fields: dict[str, str]) -> str:
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert token is not None, "no CSRF token on the page"
        data = urllib.parse.urlencode({**fields, "csrfmiddlewaretoken": token.group(1)}).encode()
        request = urllib.request.Request(
            self.base + path, data=data, headers={"Referer": self.base + path}
        )
        with self.opener.open(request, timeout=10) as answer:
            return str(answer.read().decode())


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    started = Demo(tmp_path / "var", free_port())
    yield started
    if started.process.poll() is None:
        started.process.send_signal(signal.SIGINT)
        try:
            started.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            started.process.kill()
            started.process.wait()
    for line in started.seen:  # never leak a child, whatever failed
        found = re.search(r"(worker|web server): pid (\d+)", line)
        if found and alive(int(found.group(2))):
            os.killpg(int(found.group(2)), signal.SIGKILL)
    embedded.stop(tmp_path / "var" / "emq")


def test_a_guess_through_the_web_page_is_scored_and_ctrl_c_stops_everything(
    demo: Demo,
) -> None:
    worker_pid = int(demo.wait_for(r"- worker: pid (\d+)").group(1))
    web = demo.wait_for(r"- web server: pid (\d+) on (http://\S+)/ ")
    web_pid, base = int(web.group(1)), web.group(2)
    demo.wait_for(r"The others' worst wait")  # the flood ran and was scored
    demo.wait_for(r"The demo is running")
    demo.wait_for(r"the admin lanes  http://\S+/admin/django_emq/lane/$")  # the view, not the index
    assert embedded.is_running(demo.var / "emq")

    browser = Browser(base)
    login = browser.get("/accounts/login/")
    page = browser.post_form(
        "/accounts/login/", login, {"username": "alice", "password": "emq-demo", "next": "/"}
    )
    assert "Crack the code" in page
    assert "alice" in page
    page = browser.post_form("/guess/", page, {"code": "0427"})
    assert "0427 sent for scoring" in page

    deadline = time.monotonic() + 30
    while True:
        state: dict[str, Any] = json.loads(browser.get("/api/guesses/"))
        newest = state["guesses"][0]
        assert newest["code"] == "0427"
        if newest["state"] == "scored":
            break
        assert time.monotonic() < deadline, f"never scored: {newest}"
        time.sleep(0.05)
    assert newest["bulls"] is not None
    assert newest["cows"] is not None

    demo.process.send_signal(signal.SIGINT)
    assert demo.process.wait(timeout=60) == 0
    demo.rest(timeout=10)
    assert "stopped the worker" in demo.output
    assert "stopped the web server" in demo.output
    assert "stopped the embedded Valkey" in demo.output
    assert not alive(worker_pid)
    assert not alive(web_pid)
    assert not embedded.is_running(demo.var / "emq")
