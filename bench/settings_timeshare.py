"""Settings of ``bench/timeshare.py``'s worker: ``bench.settings`` with the queue's
fairness from ``$BENCH_FAIRNESS`` (``count`` or ``time``)."""

from __future__ import annotations

import os

from bench.settings import *  # noqa: F403
from bench.settings import EMQ

EMQ = {**EMQ, "FAIRNESS": os.environ.get("BENCH_FAIRNESS", "count")}
