"""The backend Django's own task tests run against: ``FairLanesBackend`` with the
one method those tests' ``setUp`` calls on the backend they configure.

Django's ``TaskTestCase.setUp`` calls ``default_task_backend.clear()``
(``DummyBackend`` forgets the results it keeps). Every test here starts on a
fresh Valkey database already (the ``emq`` fixture), so there is nothing to
forget: ``clear()`` does nothing. Nothing else differs from the real backend.
"""

from __future__ import annotations

from django_emq.backend import FairLanesBackend as RealBackend


class FairLanesBackend(RealBackend):
    """``FairLanesBackend`` answering ``clear()`` as the tests' setUp expects."""

    def clear(self) -> None:
        """Nothing to clear: the test's Valkey database is fresh."""
