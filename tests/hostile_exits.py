"""A task module that calls ``sys.exit()`` at import (tests/test_hostile_tasks.py):
the worker must not take it as its own exit."""

import sys

sys.exit("this task module exits the process that imports it")
