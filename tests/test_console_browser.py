"""The operator's console in a real browser (Debian's headless Chromium, as in
``test_admin_browser``): a flood and a failing task run by a worker; the
operator finds the dead job from the queue's row, reads its three attempts'
times and tracebacks, retries it, cancels a pending job, and sees the chart gain a
point. Screenshots of the pages land in ``test-artifacts/`` (git-ignored), so
a test run never changes the tree; copy one into ``docs/img/`` to refresh the
docs' pictures."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.tasks import task_backends
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.wait import WebDriverWait

from django_emq import enqueue_for
from django_emq.backend import FairLanesBackend
from django_emq.engine.rows import attempt_history
from django_emq.lanes import lane_for

from . import tasks
from .factories import make_user
from .helpers import server_ms, sleep_past
from .test_admin_browser import PATIENCE, browser, wait_for

__all__ = ["browser"]  # the fixture, used below

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


def shot(driver: WebDriver, name: str) -> None:
    """A screenshot of the whole page, at a readable size."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(int(height), 700), 2000))
    driver.execute_script("window.scrollTo(0, 0)")
    ARTIFACTS.mkdir(exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / name))
    driver.set_window_size(1400, 1100)


#: The WCAG contrast ratio of an element's ``arguments[1]`` colour (``color``
#: for text, ``stroke`` for an SVG line) against the first opaque background
#: behind it, looked for from the element or from its closest ``arguments[2]``.
CONTRAST_JS = """
const el = document.querySelector(arguments[0]);
const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
let back = arguments[2] ? el.closest(arguments[2]) : el, bg = [255, 255, 255];
while (back) {
  const c = rgb(getComputedStyle(back).backgroundColor);
  if (c.length === 3 || (c.length === 4 && c[3] > 0)) { bg = c; break; }
  back = back.parentElement;
}
const lum = (c) => {
  const [r, g, b] = c.slice(0, 3).map((v) => {
    v /= 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
};
const a = lum(rgb(getComputedStyle(el)[arguments[1]])), b = lum(bg);
return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
"""


def contrast(driver: WebDriver, css: str, colour: str = "color", within: str = "") -> float:
    return float(driver.execute_script(CONTRAST_JS, css, colour, within))


def submit(driver: WebDriver, css: str) -> None:
    old = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.CSS_SELECTOR, css).click()
    WebDriverWait(driver, PATIENCE).until(
        lambda d: old.id != d.find_element(By.TAG_NAME, "html").id
    )


@pytest.mark.django_db(transaction=True)
def test_an_operator_finds_reads_retries_and_cancels_jobs_in_a_browser(
    emq: Any,
    live_server: Any,
    browser: WebDriver,
    django_user_model: type[User],
    settings: Any,
) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    make_user("operator", password="s3cret!", staff=True, perms=["manage_lanes"])
    mallory, bob = make_user("mallory"), make_user("bob")
    base = live_server.url + "/admin/django_emq/"

    browser.get(f"{live_server.url}/admin/login/?next=/admin/django_emq/job/charts/default/")
    browser.find_element(By.ID, "id_username").send_keys("operator")
    browser.find_element(By.ID, "id_password").send_keys("s3cret!")
    browser.find_element(By.CSS_SELECTOR, 'input[type="submit"]').click()
    charts = wait_for(browser, ".emq-charts")
    assert charts.get_attribute("data-points") == "0", "nothing has happened yet"

    # A flood from mallory, one failing job from bob; a worker runs them all.
    for i in range(30):
        enqueue_for(mallory, tasks.record, f"m{i}")
    failing = enqueue_for(bob, tasks.boom, "bob")
    call_command("run_emq_worker", "--burst", "--lease", "5", verbosity=0)

    # The queue's row says one job is dead: it leads to the dead jobs.
    browser.get(base + "lane/")
    browser.find_element(By.CSS_SELECTOR, "a.emq-dead-link").click()
    row = wait_for(browser, f'tr.emq-job[data-job="{failing.id}"]')
    shot(browser, "admin-jobs-dead.png")
    row.find_element(By.CSS_SELECTOR, "td.emq-id a").click()

    # Its page: three attempts, each with its worker, start and end (seconds,
    # in the site's time zone), how long it took, and its traceback.
    wait_for(browser, "#emq-job-attempts")
    attempts = browser.find_elements(By.CSS_SELECTOR, "tr.emq-attempt")
    assert len(attempts) == 3
    backend = task_backends["default"]
    assert isinstance(backend, FairLanesBackend)
    job_row = backend.queue("default").job(failing.id)
    assert job_row is not None
    kept = attempt_history(job_row).kept
    zone = ZoneInfo(settings.TIME_ZONE)
    for attempt, shown in zip(kept, attempts, strict=True):
        assert shown.get_attribute("data-attempt") == str(attempt.number)
        assert "emq-outcome-failed" in str(shown.get_attribute("class"))
        assert shown.find_element(By.CSS_SELECTOR, ".emq-attempt-worker").text == attempt.worker
        for css, ms in (
            (".emq-attempt-start", attempt.start_ms),
            (".emq-attempt-end", attempt.end_ms),
        ):
            assert ms is not None
            at = datetime.fromtimestamp(ms / 1000, zone).strftime("%Y-%m-%d %H:%M:%S")
            assert shown.find_element(By.CSS_SELECTOR, css).text == at
        took = shown.find_element(By.CSS_SELECTOR, ".emq-attempt-took").text
        assert re.fullmatch(r"\d+ ms|\d+\.\d s", took), took
        if shown.find_element(By.TAG_NAME, "details").get_attribute("open") is None:
            shown.find_element(By.TAG_NAME, "summary").click()  # the latest is open
        assert "RuntimeError: boom bob" in shown.find_element(By.CSS_SELECTOR, "pre").text
    assert browser.find_element(By.ID, "emq-job-state").text.startswith("dead")
    shot(browser, "admin-job.png")

    # In dark mode the attempts stay readable: text against what lies behind it.
    browser.execute_script("localStorage.setItem('theme', 'dark')")
    browser.refresh()
    wait_for(browser, 'html[data-theme="dark"] #emq-job-attempts')
    for css in (".emq-outcome", ".emq-attempt-start", "pre.emq-traceback", ".emq-error-class"):
        ratio = contrast(browser, css)
        assert ratio >= 4.5, f"{css}: contrast {ratio:.1f} in dark mode"
    shot(browser, "admin-job-dark.png")
    browser.execute_script("localStorage.setItem('theme', 'light')")
    browser.refresh()

    # Retry it: back in its lane.
    submit(browser, "#emq-retry")
    assert "sent back to its lane" in browser.find_element(By.CSS_SELECTOR, ".messagelist").text
    assert browser.find_element(By.ID, "emq-job-state").text.startswith("pending")

    # Cancel a pending job: it will not run.
    later = enqueue_for(mallory, tasks.record, "never")
    browser.get(f"{base}job/default/{later.id}/")
    submit(browser, "#emq-cancel")
    assert browser.find_element(By.ID, "emq-job-state").text.startswith("cancelled")
    assert tasks.record.get_result(later.id).status == "FAILED"

    # The chart has gained a point.
    browser.get(base + "job/charts/default/")
    charts = wait_for(browser, ".emq-charts")
    # one point per minute that saw jobs: two when the run crossed a minute
    assert charts.get_attribute("data-points") in ("1", "2")
    dots = browser.find_elements(By.CSS_SELECTOR, "circle.emq-dot")
    assert dots
    assert all(dot.is_displayed() for dot in dots[:3])
    shot(browser, "admin-charts.png")


@pytest.mark.django_db(transaction=True)
def test_the_charts_fill_the_page_and_read_in_light_and_dark_mode(
    emq: Any, live_server: Any, browser: WebDriver, settings: Any
) -> None:
    """The charts take the content's width (wider than the old fixed 640 px at a
    1400 px window), the y label lies inside the chart, and every series (the
    "finished" one included) stands out from the background in both themes."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    make_user("operator", password="s3cret!", staff=True, perms=["view_lanes"])
    mallory = make_user("mallory")
    for i in range(12):
        enqueue_for(mallory, tasks.record, f"m{i}")
    enqueue_for(mallory, tasks.boom, "m")
    call_command("run_emq_worker", "--burst", "--lease", "5", verbosity=0)
    for i in range(5):  # waiting now: the fairness chart has lanes to draw
        enqueue_for(mallory, tasks.record, f"later{i}")
    enqueue_for(make_user("bob"), tasks.record, "bob")

    browser.get(f"{live_server.url}/admin/login/?next=/admin/django_emq/job/charts/default/")
    browser.find_element(By.ID, "id_username").send_keys("operator")
    browser.find_element(By.ID, "id_password").send_keys("s3cret!")
    browser.find_element(By.CSS_SELECTOR, 'input[type="submit"]').click()
    for theme in ("light", "dark"):
        browser.execute_script(f"localStorage.setItem('theme', '{theme}')")
        browser.refresh()
        wait_for(browser, f'html[data-theme="{theme}"] .emq-charts')
        content = browser.find_element(By.CSS_SELECTOR, ".emq-charts").rect
        for svg in browser.find_elements(By.CSS_SELECTOR, "figure.emq-chart > svg"):
            box = svg.rect
            assert box["width"] > 900, f"{theme}: a chart {box['width']} px wide"
            assert abs(box["width"] - content["width"]) < 40, "as wide as the content"
        for label in browser.find_elements(By.CSS_SELECTOR, "text.emq-ymax"):
            chart = label.find_element(By.XPATH, "ancestor::*[local-name()='svg'][last()]").rect
            assert label.rect["x"] >= chart["x"], f"{theme}: the y label is cut: {label.text!r}"
            assert label.text.endswith(("jobs", " s"))
        for series in ("emq-s1", "emq-s2", "emq-s3"):
            css = f".emq-charts path.emq-line.{series}"
            ratio = contrast(browser, css, "stroke", "div")
            assert ratio >= 3, f"{theme}: {series} at contrast {ratio:.1f}"
        shot(browser, f"admin-charts-{theme}.png")
    browser.execute_script("localStorage.setItem('theme', 'light')")


@pytest.mark.django_db(transaction=True)
def test_a_lanes_page_says_running_lays_out_its_rate_form_and_words_empty_lists(
    emq: Any, live_server: Any, browser: WebDriver, settings: Any
) -> None:
    """One word for claimed jobs ("running", never "in flight" or "active"),
    the rate form on one row under its label, empty lists and a cancelled
    job in words of their own, the lane's scheduled jobs listed; light and
    dark screenshots of the lane."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    make_user("operator", password="s3cret!", staff=True, perms=["manage_lanes"])
    mallory = make_user("mallory")
    jobs = [enqueue_for(mallory, tasks.record, f"m{i}") for i in range(3)]
    deferred = tasks.record.using(run_after=datetime.now(ZoneInfo("UTC")) + timedelta(hours=2))
    later = enqueue_for(mallory, deferred, "later")
    base = live_server.url + "/admin/django_emq/"
    browser.get(f"{live_server.url}/admin/login/?next=/admin/django_emq/job/")
    browser.find_element(By.ID, "id_username").send_keys("operator")
    browser.find_element(By.ID, "id_password").send_keys("s3cret!")
    browser.find_element(By.CSS_SELECTOR, 'input[type="submit"]').click()
    wait_for(browser, "#emq-job-list")
    browser.find_element(By.CSS_SELECTOR, 'a.emq-tab[data-state="inflight"]').click()
    assert wait_for(browser, "#emq-no-jobs").text == "No job is running."
    assert "in flight" not in browser.find_element(By.TAG_NAME, "body").text.lower()

    browser.get(f"{base}job/default/{jobs[0].id}/")
    submit(browser, "#emq-cancel")
    state = browser.find_element(By.ID, "emq-job-state").text
    assert state.startswith("cancelled — before it ran"), state
    assert "cancelled before it ran" in browser.find_element(By.ID, "emq-job-attempts").text

    browser.find_element(By.ID, "emq-job-lane").click()
    wait_for(browser, "#emq-lane-controls")
    for theme in ("light", "dark"):
        browser.execute_script(f"localStorage.setItem('theme', '{theme}')")
        browser.refresh()
        wait_for(browser, f'html[data-theme="{theme}"] #emq-lane-controls')
        body = browser.find_element(By.TAG_NAME, "body").text
        assert "in flight" not in body.lower()
        assert "0 jobs running" in body.lower()
        assert "None of this lane\u2019s jobs is running." in body
        assert "No dead job in this lane." in body
        scheduled = browser.find_element(By.ID, "emq-scheduled")
        assert scheduled.is_displayed()
        assert later.id in scheduled.text
        assert "1 scheduled job, by due time" in scheduled.text.lower()
        pending, running = (
            browser.find_element(By.ID, i).rect for i in ("emq-pending", "emq-inflight")
        )
        assert pending["y"] < scheduled.rect["y"] < running["y"], "between pending and running"
        count, per = (
            browser.find_element(By.ID, i).rect for i in ("emq-rate-count", "emq-rate-per")
        )
        label = browser.find_element(By.CSS_SELECTOR, 'label[for="emq-rate-count"]').rect
        help_ = browser.find_element(By.ID, "emq-rate-help").rect
        assert abs(count["y"] - per["y"]) < 3, "the two rate fields share one row"
        assert per["x"] > count["x"] + count["width"]
        assert label["y"] + label["height"] <= count["y"] + 1, "its label above the row"
        assert help_["y"] >= count["y"] + count["height"] - 1, "the help under the row"
        shot(browser, f"admin-lane-{theme}.png")
    browser.execute_script("localStorage.setItem('theme', 'light')")


@pytest.mark.django_db(transaction=True)
def test_the_lane_list_orders_by_its_headers_in_a_browser(
    emq: Any, live_server: Any, browser: WebDriver, settings: Any
) -> None:
    """Click *Running*: the lanes with running jobs, the most first; click
    *Oldest job waiting*: the page, the longest waiting first."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    make_user("operator", password="s3cret!", staff=True, perms=["view_lanes"])
    early, late = make_user("early"), make_user("late")
    backend = task_backends["default"]
    assert isinstance(backend, FairLanesBackend)
    enqueue_for(early, tasks.record, "e0")
    enqueue_for(early, tasks.record, "e1")
    assert backend.engine("default").claim(600_000), "early's first job runs"
    sleep_past(emq, server_ms(emq))  # late's jobs on a later ms: no tie in the oldest order
    for i in range(4):
        enqueue_for(late, tasks.record, f"l{i}")
    browser.get(f"{live_server.url}/admin/login/?next=/admin/django_emq/lane/%3Frefresh%3D0")
    browser.find_element(By.ID, "id_username").send_keys("operator")
    browser.find_element(By.ID, "id_password").send_keys("s3cret!")
    browser.find_element(By.CSS_SELECTOR, 'input[type="submit"]').click()
    wait_for(browser, "tr.emq-lane")

    def order() -> list[str]:
        return [
            str(row.get_attribute("data-lane"))
            for row in browser.find_elements(By.CSS_SELECTOR, "tr.emq-lane")
        ]

    assert order() == [lane_for(late), lane_for(early)], "deepest first"
    browser.find_element(By.CSS_SELECTOR, "#emq-sort-running a").click()
    wait_for(browser, '#emq-sort-running[aria-sort="descending"]')
    assert order() == [lane_for(early)]
    browser.find_element(By.CSS_SELECTOR, "#emq-sort-oldest a").click()
    wait_for(browser, '#emq-sort-oldest[aria-sort="descending"]')
    assert order() == [lane_for(early), lane_for(late)]
    shot(browser, "admin-lanes-by-oldest.png")
