"""A task module that ends the process importing it with ``os._exit()`` (no
exception to catch; tests/test_hostile_exits.py): each worker that meets one of
its jobs dies, the job's lease expires, and it is dead after ``MAX_EXPIRIES``."""

import os

os._exit(3)
