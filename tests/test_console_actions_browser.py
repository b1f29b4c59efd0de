"""The console's round-two actions in a real browser (headless Chromium, as
``test_console_browser``): the lane filters, running a dead job again,
searching for part of a task's name and cancelling every job of that task,
asking a running job to stop (its page keeps the request after the task
returned, and refreshes itself while it runs), and stopping a worker from the
workers page. Every action goes through its
confirmation page. Screenshots land in ``test-artifacts/`` (git-ignored)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.tasks import task_backends
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from django_emq import enqueue_for
from django_emq.backend import FairLanesBackend
from django_emq.engine.queue import Queue
from django_emq.engine.rows import heartbeat
from django_emq.lanes import lane_for

from . import tasks
from .factories import make_user
from .test_admin_browser import browser, wait_for
from .test_console_browser import shot, submit

__all__ = ["browser"]  # the fixture, used below


def queue() -> Queue:
    backend = task_backends["default"]
    assert isinstance(backend, FairLanesBackend)
    return backend.queue("default")


def log_in(driver: WebDriver, live_server: Any, settings: Any, then: str) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    make_user("operator", password="s3cret!", staff=True, perms=["manage_lanes"])
    driver.get(f"{live_server.url}/admin/login/?next={then}")
    driver.find_element(By.ID, "id_username").send_keys("operator")
    driver.find_element(By.ID, "id_password").send_keys("s3cret!")
    driver.find_element(By.CSS_SELECTOR, 'input[type="submit"]').click()


def messages(driver: WebDriver) -> list[str]:
    return [m.text for m in driver.find_elements(By.CSS_SELECTOR, "ul.messagelist li")]


@pytest.mark.django_db(transaction=True)
def test_filters_run_again_and_bulk_cancel_in_a_browser(
    emq: Any, live_server: Any, browser: WebDriver, django_user_model: type[User], settings: Any
) -> None:
    mallory, bob, carol = make_user("mallory"), make_user("bob"), make_user("carol")
    failing = enqueue_for(bob, tasks.boom, "bob")
    enqueue_for(bob, tasks.record, "bob")  # one that finished: a search finds it
    call_command("run_emq_worker", "--burst", "--lease", "5", verbosity=0)
    flood = [enqueue_for(mallory, tasks.record, f"m{i}") for i in range(5)]
    enqueue_for(carol, tasks.add, 1, 2)
    q = queue()
    q.pause(lane_for(carol))
    log_in(browser, live_server, settings, "/admin/django_emq/lane/")
    base = live_server.url + "/admin/django_emq/"

    # The lane list, filtered to the paused lanes: carol's only.
    wait_for(browser, "#emq-lane-filters")
    submit(browser, "#emq-filter-paused")
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.emq-lane")
    assert [r.get_attribute("data-lane") for r in rows] == [lane_for(carol)]
    shot(browser, "admin-lanes-paused.png")

    # The dead job, run again: a confirmation page, then the new job's page.
    browser.get(f"{base}job/default/{failing.id}/")
    submit(browser, "#emq-run-again")
    assert "Run job" in browser.find_element(By.ID, "emq-bulk-question").text
    submit(browser, "#emq-confirm-yes")
    assert any("a copy of job" in m for m in messages(browser))
    assert browser.find_element(By.ID, "emq-job-state").text.startswith("pending")
    assert f"/{failing.id}/" not in browser.current_url

    # Every job of mallory's task, cancelled from a search for part of its
    # name, in capitals: the Task field offers the whole path the search found.
    browser.get(f"{base}job/?queue=default")
    wait_for(browser, "#emq-q").send_keys("RECORD")
    submit(browser, "#emq-search-go")
    heading = wait_for(browser, "#emq-search-heading").get_attribute("textContent")
    assert heading == "1 job whose task path contains “RECORD”", heading
    task_field = wait_for(browser, "#emq-bulk-task")
    assert task_field.get_attribute("value") == "tests.tasks.record"
    shot(browser, "admin-jobs-bulk.png")
    submit(browser, "#emq-cancel-task")
    assert "Cancel every job of task" in browser.find_element(By.ID, "emq-bulk-question").text
    shot(browser, "admin-bulk-confirm.png")
    submit(browser, "#emq-confirm-yes")
    assert messages(browser) == ["Cancelled 5 jobs: they will not run."]
    assert {(q.job(r.id) or {}).get("state") for r in flood} == {"cancelled"}


@pytest.mark.django_db(transaction=True)
def test_stop_a_running_job_and_a_worker_in_a_browser(
    emq: Any, live_server: Any, browser: WebDriver, django_user_model: type[User], settings: Any
) -> None:
    alice = make_user("alice")
    result = enqueue_for(alice, tasks.record, "a")
    q = queue()
    claimed = q.claim(60_000)
    assert claimed is not None
    (claim,) = claimed
    log_in(browser, live_server, settings, f"/admin/django_emq/job/default/{result.id}/")
    base = live_server.url + "/admin/django_emq/"

    # A running job's page refreshes itself; ask it to stop.
    wait_for(browser, "#emq-job-summary")
    assert browser.find_elements(By.CSS_SELECTOR, 'meta[http-equiv="refresh"]')
    assert browser.find_element(By.ID, "emq-refresh-toggle").is_displayed()
    submit(browser, "#emq-cancel")
    assert "asked to stop at" in browser.find_element(By.ID, "emq-job-stop-asked").text

    # The task returns all the same: done, and the page keeps the request.
    q.complete(claim.job_id, claim.token, "stopped")
    browser.get(f"{base}job/default/{result.id}/")
    stop_asked = wait_for(browser, "#emq-job-stop-asked")
    assert "its task returned" in stop_asked.text
    assert browser.find_element(By.ID, "emq-job-state").text.startswith("done")
    assert not browser.find_elements(By.CSS_SELECTOR, 'meta[http-equiv="refresh"]')
    shot(browser, "admin-job-stop-asked.png")

    # The workers page: a stopped worker listed as stopped, a live one stopped.
    now_ms = int(q.connection.time()[0]) * 1000
    q.connection.hset(
        q.keys.workers,
        mapping={
            "host-a:1": heartbeat(
                host="host-a",
                pid=1,
                done=4,
                running=0,
                beat_ms=now_ms - 60_000,
                stopped_ms=now_ms - 60_000,
            ),
            "host-b:2": heartbeat(host="host-b", pid=2, done=7, running=0, beat_ms=now_ms),
        },
    )
    browser.get(f"{base}job/workers/")
    stopped = wait_for(browser, 'tr[id="worker-default-host-a:1"]')
    columns = browser.find_elements(By.CSS_SELECTOR, "#content thead th")
    assert "Running jobs" in [c.get_attribute("textContent") for c in columns]
    assert "stopped at" in stopped.text
    assert not stopped.find_elements(By.CSS_SELECTOR, ".emq-stop-worker")
    live = browser.find_element(By.CSS_SELECTOR, 'tr[id="worker-default-host-b:2"]')
    live.find_element(By.CSS_SELECTOR, ".emq-stop-worker").click()
    wait_for(browser, "#emq-bulk-question")
    assert "Stop worker host-b:2" in browser.find_element(By.ID, "emq-bulk-question").text
    submit(browser, "#emq-confirm-yes")
    assert "was asked to stop" in messages(browser)[0]
    live = browser.find_element(By.CSS_SELECTOR, 'tr[id="worker-default-host-b:2"]')
    assert "stopping" in live.text
    shot(browser, "admin-workers-stopping.png")
