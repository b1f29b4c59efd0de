"""The peers' side of the benchmark: task modules for RQ, Celery, Dramatiq and Huey,
and the driver that enqueues and times them. Runs in ``bench/.venv-peers`` only."""
