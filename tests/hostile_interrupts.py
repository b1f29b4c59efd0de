"""A task module that raises ``KeyboardInterrupt`` at import (a ``BaseException``
that is neither an ``Exception`` nor ``SystemExit``; tests/test_hostile_tasks.py):
the worker retries its jobs like failures and goes on."""

raise KeyboardInterrupt("this task module interrupts the process that imports it")
