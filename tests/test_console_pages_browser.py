"""Issue 22's page changes that had a Django-client test and no real-browser
one, in headless Chromium (as ``test_console_browser``): the Dead list names
the exception class once, a dead job's page gives the time it ran, a search
for part of a task path pages through its hits with headings that count
them, Move takes a username, and the rate form keeps its row in narrower
windows."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from django_emq import enqueue_for
from django_emq.admin import JobAdmin
from django_emq.lanes import lane_for

from . import tasks
from .factories import make_user
from .test_admin_browser import browser, wait_for
from .test_console_actions_browser import log_in, messages, queue
from .test_console_browser import ARTIFACTS, shot, submit

__all__ = ["browser"]  # the fixture, used below


def heading(driver: WebDriver) -> str:
    """The search heading as written (the caption's CSS shows it in capitals)."""
    return str(wait_for(driver, "#emq-search-heading").get_attribute("textContent"))


@pytest.mark.django_db(transaction=True)
def test_dead_list_job_page_search_pager_and_move_by_user_in_a_browser(
    emq: Any, live_server: Any, browser: WebDriver, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(JobAdmin, "jobs_per_page", 2)
    mallory, bob = make_user("mallory"), make_user("bob")
    failing = enqueue_for(bob, tasks.boom, "bob")
    for i in range(5):
        enqueue_for(mallory, tasks.record, f"m{i}")
    call_command("run_emq_worker", "--burst", "--lease", "5", verbosity=0)
    waiting = enqueue_for(mallory, tasks.record, "waiting")
    log_in(browser, live_server, settings, "/admin/django_emq/job/")
    base = live_server.url + "/admin/django_emq/"
    wait_for(browser, "#emq-job-list")
    browser.get(f"{base}job/?queue=default&state=dead")

    # The Dead list: the exception's class once, its message beside it.
    (row,) = wait_for(browser, "#emq-job-list").find_elements(By.CSS_SELECTOR, "tbody tr")
    assert failing.id in row.text
    assert row.text.count("RuntimeError") == 1, row.text
    assert "boom bob" in row.text

    # The dead job's page: when it finished and how long its attempts ran.
    row.find_element(By.LINK_TEXT, failing.id).click()
    state = wait_for(browser, "#emq-job-state")
    assert state.text.startswith("dead"), state.text
    facts = browser.find_element(By.CSS_SELECTOR, "#content table").text
    assert "(ran " in facts, facts

    # A search for part of the task's name, two hits a page: the heading counts
    # them and the pager walks to the last page.
    browser.get(f"{base}job/?queue=default")
    wait_for(browser, "#emq-q").send_keys("Record")
    submit(browser, "#emq-search-go")
    assert heading(browser) == "Jobs whose task path contains “Record”: 1\u20132, and more"
    submit(browser, '#emq-search-pager a[rel="next"]')
    assert heading(browser) == "Jobs whose task path contains “Record”: 3\u20134, and more"
    submit(browser, '#emq-search-pager a[rel="next"]')
    assert heading(browser) == "Jobs whose task path contains “Record”: 5\u20135 of 5"
    assert not browser.find_elements(By.CSS_SELECTOR, '#emq-search-pager a[rel="next"]')
    shot(browser, "admin-search-last-page.png")

    # Move a pending job to a user's lane by the user's email, in any case.
    browser.get(f"{base}job/default/{waiting.id}/")
    wait_for(browser, "#emq-move-lane").send_keys(bob.email.upper())
    submit(browser, 'form:has(#emq-move-lane) input[type="submit"]')
    assert messages(browser) == [f"Job {waiting.id} moved to lane {lane_for(bob)}."]
    assert (queue().job(waiting.id) or {})["group"] == lane_for(bob)

    # The rate form stays one row under its label in narrower windows too.
    browser.get(f"{base}lane/default/{lane_for(mallory)}/")
    for width in (1024, 800):
        browser.set_window_size(width, 1000)
        wait_for(browser, "#emq-rate-count")
        count, per = (
            browser.find_element(By.ID, i).rect for i in ("emq-rate-count", "emq-rate-per")
        )
        label = browser.find_element(By.CSS_SELECTOR, 'label[for="emq-rate-count"]').rect
        assert abs(count["y"] - per["y"]) < 3, f"{width} px: the rate fields on two rows"
        assert per["x"] > count["x"] + count["width"], f"{width} px"
        assert label["y"] + label["height"] <= count["y"] + 1, f"{width} px: label beside the row"
        browser.save_screenshot(str(ARTIFACTS / f"admin-lane-rate-{width}.png"))  # at that width
