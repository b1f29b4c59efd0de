"""A fork server for worker processes: ``python -m tests.fork_server``.

It sets Django up once, then, for every request line read on stdin (a JSON
object: ``args`` for ``run_emq_worker``, ``log`` a file for its output), forks
a child that runs the command, and answers the child's pid on stdout. A cold
``python -m django run_emq_worker`` costs about 0.7 CPU-seconds of imports
before it serves a job; a fork costs milliseconds. The chaos test kills a
worker twice a second: started cold, the replacements would spend most of a
two-core machine on imports, and under load would be killed before they ever
served a job.

The children are ordinary processes running the ordinary command; the tests
kill and stop them with real signals. They are reaped by the kernel
(``SIGCHLD`` ignored), so this server never leaves zombies behind.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback


def serve() -> None:
    import django

    django.setup()
    from django.core.management import call_command

    # Warm the imports the command needs, so children start serving at once.
    from django_emq.management.commands import run_emq_worker  # noqa: F401

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                os.dup2(log, 1)
                os.dup2(log, 2)
                call_command("run_emq_worker", *request["args"])
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        print(pid, flush=True)


if __name__ == "__main__":
    serve()
