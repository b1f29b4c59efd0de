"""The expected failures of ``ledger.py``, marked on the tests run unedited:
strict, so an expected failure that passes fails the suite; and the tests of
those classes it calls not applicable, left out of the run (deselected, each
named with its reason in the terminal summary: never a silent skip)."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import ledger

#: The fetched upstream files are read by the tests here, never collected alone.
collect_ignore = ["sources"]

#: The module that runs the upstream tests unedited.
RUNNER = Path(__file__).resolve().parent / "test_django_tasks.py"


#: The tests left out, with the ledger's reason: told in the terminal summary.
LEFT_OUT: list[tuple[str, str]] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test run unedited that fails on purpose ``xfail(strict=True)``,
    with the reason the ledger gives; leave out the ones it calls not applicable."""
    kept, dropped = [], []
    for item in items:
        cls = getattr(item, "cls", None)  # a test method's class (unittest items have one)
        if item.path != RUNNER or cls is None:
            kept.append(item)
            continue
        why_not = ledger.left_out(cls.__name__, item.name)
        if why_not is not None:
            dropped.append(item)
            LEFT_OUT.append((item.nodeid, why_not))
            continue
        kept.append(item)
        fails = ledger.expected_failure(cls.__name__, item.name)
        if fails is not None:
            reason = f"{fails.reason} (docs/compatibility.md: {fails.section})"
            item.add_marker(pytest.mark.xfail(reason=reason, strict=not fails.in_subtests))
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name every upstream test left out, and why."""
    if LEFT_OUT:
        terminalreporter.section("upstream tests not applicable (tests/upstream/ledger.py)")
        for nodeid, why in LEFT_OUT:
            terminalreporter.line(f"{nodeid}: {why}")
