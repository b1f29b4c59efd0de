"""A task module that raises RuntimeError at import (tests/test_hostile_tasks.py):
a worker that meets one of its jobs retries it like a failure and goes on."""

raise RuntimeError("this task module refuses to import")
