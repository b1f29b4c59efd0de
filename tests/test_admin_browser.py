"""The lane view in a real browser: Debian's headless Chromium, driven by
Selenium through Debian's chromedriver (nothing is downloaded), against
pytest-django's live server and the real Valkey server.

``scripts/ensure-chromium.sh`` installs both when they are missing. The
screenshots land in ``test-artifacts/`` (git-ignored).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.tasks import task_backends
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait

from django_emq.backend import FairLanesBackend
from django_emq.engine import browse
from django_emq.engine.queue import Queue
from django_emq.lanes import lane_for

from .factories import make_user
from .helpers import LONG_LEASE, fill

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
CHROME_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1400,1100",
)
#: How long the browser may take to show what the server already did.
PATIENCE = 10


@pytest.fixture
def browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WebDriver]:
    """Headless Debian Chromium with a fresh profile."""
    for path in (CHROMIUM, CHROMEDRIVER):
        assert path.is_file(), f"{path} is missing: run scripts/ensure-chromium.sh"
    monkeypatch.setenv("SE_OFFLINE", "true")  # belt and braces: Selenium Manager stays offline
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver: WebDriver, css: str) -> WebElement:
    found: WebElement = WebDriverWait(driver, PATIENCE).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css))
    )
    return found


def lane_row(driver: WebDriver, lane: str) -> WebElement:
    return driver.find_element(By.CSS_SELECTOR, f'tr.emq-lane[data-lane="{lane}"]')


def shows_paused(driver: WebDriver, lane: str) -> bool:
    return bool(lane_row(driver, lane).find_elements(By.CSS_SELECTOR, ".emq-status-paused"))


@pytest.mark.django_db(transaction=True)
def test_an_operator_sees_the_lanes_and_pauses_one_in_a_browser(
    emq: Any,
    live_server: Any,
    browser: WebDriver,
    django_user_model: type[User],
    settings: Any,
) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    make_user("operator", password="s3cret!", staff=True, perms=["manage_lanes"])
    users = [make_user(name) for name in ("alice", "bob", "carol")]
    backend = task_backends["default"]
    assert isinstance(backend, FairLanesBackend)
    queue: Queue = backend.queue("default")
    depths = {lane_for(u): d for u, d in zip(users, (12, 5, 2), strict=True)}
    for lane, depth in depths.items():
        fill(queue, lane, depth)
    # Something in flight and a worker's heartbeat, so every part of the page shows.
    claimed = queue.claim(LONG_LEASE, worker_id="web-1:4242")
    assert claimed is not None
    depths[claimed[0].lane] -= 1
    beat = browse.overview(queue).server_ms
    queue.connection.hset(
        queue.keys.workers,
        "web-1:4242",
        f'{{"host": "web-1", "pid": 4242, "done": 318, "beat": {beat}, "running": 1}}',
    )

    # Log in through the admin's own form.
    browser.get(f"{live_server.url}/admin/login/?next=/admin/django_emq/lane/")
    browser.find_element(By.ID, "id_username").send_keys("operator")
    browser.find_element(By.ID, "id_password").send_keys("s3cret!")
    browser.find_element(By.CSS_SELECTOR, 'input[type="submit"]').click()
    wait_for(browser, "#result_list")
    assert browser.find_elements(By.CSS_SELECTOR, 'meta[http-equiv="refresh"]')

    # Switch the auto-refresh off, so the page holds still while we look.
    browser.find_element(By.ID, "emq-refresh-toggle").click()
    WebDriverWait(browser, PATIENCE).until(lambda d: "refresh=0" in d.current_url)
    assert not browser.find_elements(By.CSS_SELECTOR, 'meta[http-equiv="refresh"]')

    # Depths, deepest first, and bars against the deepest lane.
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.emq-lane")
    shown = [r.get_attribute("data-lane") for r in rows]
    assert shown == sorted(depths, key=lambda lane: -depths[lane])
    deepest = max(depths.values())
    for lane, depth in depths.items():
        row = lane_row(browser, lane)
        assert row.find_element(By.CSS_SELECTOR, ".emq-depth").text == str(depth)
        bar = row.find_element(By.CSS_SELECTOR, "meter.emq-bar")
        assert bar.is_displayed()
        assert bar.size["width"] > 50
        assert float(bar.get_attribute("value") or "nan") == depth
        assert float(bar.get_attribute("max") or "nan") == deepest
        owner = next(u for u in users if lane_for(u) == lane)
        assert owner.get_username() in row.text
        assert not shows_paused(browser, lane)

    # Pause bob's lane through the form of its detail page.
    bob = lane_for(users[1])
    lane_row(browser, bob).find_element(By.LINK_TEXT, bob).click()
    wait_for(browser, "#emq-pause-toggle").click()
    message = wait_for(browser, "ul.messagelist li.success")
    assert message.text == f"Lane {bob} paused."
    assert browser.find_element(By.ID, "emq-lane-status").text == "Paused"
    assert browser.find_element(By.ID, "emq-pause-toggle").get_attribute("value") == "Resume"
    assert queue.lane(bob).paused

    # Back on the list, the lane is marked paused and the others are not.
    browser.find_element(By.CSS_SELECTOR, "ol.breadcrumbs li:nth-child(3) a").click()
    wait_for(browser, "#result_list")
    assert shows_paused(browser, bob)
    assert [lane for lane in depths if shows_paused(browser, lane)] == [bob]
    assert bob not in browser.find_element(By.ID, "emq-ring").text, "a paused lane is not next"

    ARTIFACTS.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "admin-lanes.png"))
    browser.execute_script("localStorage.setItem('theme', 'dark')")
    browser.refresh()
    wait_for(browser, 'html[data-theme="dark"] #result_list')
    assert browser.save_screenshot(str(ARTIFACTS / "admin-lanes-dark.png"))
    lane_row(browser, bob).find_element(By.LINK_TEXT, bob).click()
    wait_for(browser, "#emq-lane-summary")
    assert browser.save_screenshot(str(ARTIFACTS / "admin-lane-dark.png"))
