"""A task module that reads an environment variable no worker has: a KeyError
at import (tests/test_hostile_tasks.py)."""

import os

from django.tasks import task

API_KEY = os.environ["EMQ_TEST_NEVER_SET"]


@task
def call_api() -> str:
    return API_KEY
