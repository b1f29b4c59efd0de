"""The expected failures of ``ledger.py``, marked on the tests run unedited:
strict, so an expected failure that passes fails the suite; and the tests of
those classes it calls not applicable, skipped with its reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import ledger

#: The fetched upstream files are read by the tests here, never collected alone.
collect_ignore = ["sources"]

#: The module that runs the upstream tests unedited.
RUNNER = Path(__file__).resolve().parent / "test_django_tasks.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test run unedited that fails on purpose ``xfail(strict=True)``,
    with the reason the ledger gives."""
    for item in items:
        cls = getattr(item, "cls", None)  # a test method's class (unittest items have one)
        if item.path != RUNNER or cls is None:
            continue
        fails = ledger.expected_failure(cls.__name__, item.name)
        if fails is not None:
            reason = f"{fails.reason} (docs/compatibility.md: {fails.section})"
            item.add_marker(pytest.mark.xfail(reason=reason, strict=not fails.in_subtests))
        why_not = ledger.skipped(cls.__name__, item.name)
        if why_not is not None:
            item.add_marker(pytest.mark.skip(reason=why_not))
