"""Settings of the worker processes the fault tests start: the test settings,
with ``EMQ`` overrides read from the ``EMQ_TEST_SETTINGS`` environment variable
(a JSON object), so a test can give its workers a short ``ENQUEUE_TIMEOUT``."""

import json
import os

from tests.settings import *  # noqa: F403
from tests.settings import EMQ

EMQ = {**EMQ, **json.loads(os.environ.get("EMQ_TEST_SETTINGS", "{}"))}
