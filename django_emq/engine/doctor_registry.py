"""The doctor's look at the registry of queue names (``emq:queues``, the set a
backend with ``QUEUES: []`` adds each queue name it enqueues to, and whose
queues its workers serve).

Enqueues only add to it, so names of queues that hold nothing (an enqueue
refused after its name was added, keys deleted by hand: a queue enqueued to
keeps its mint counter) stay for ever, and each worker of such a backend
serves them. The audit reports:

- ``registry-type``: the key is not a set (no worker of such a backend can
  start, and no enqueue can add to it);
- ``registry-name``: a member that is not a valid queue name (written by hand:
  workers pass over it);
- ``registry-empty``: a name whose queue (every shard of it) holds no key at
  all but the workers' own (:data:`WORKER_KEYS`: each worker serving a queue
  writes its heartbeat there, so an empty queue a worker serves keeps those).

The repair deletes a registry of the wrong type and rebuilds it from the
keyspace (the queues holding keys, but those a backend names in its own
``QUEUES``), removes invalid names, and removes the names of empty queues:
each is removed, then its queue looked at again, and put back if a job
arrived meanwhile (an enqueue between the two looks is seen by the second).

Imports redis, never Django (``manage.py emq_doctor`` is the shell).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

from . import doctor_calls
from .doctor import Finding, Report, _glob_escape
from .ids import validate_queue_name
from .keyspace import FIXED_KEY_TYPES
from .payload import text
from .queue import Queue
from .runner import SyncRunner

#: The keys of a queue that only its workers write (heartbeats, stop requests,
#: wake tokens): a queue holding nothing else holds no jobs, settings or history.
WORKER_KEYS = frozenset({"workers", "stops", "wake"})


class RegistryDoctor:
    """Audits (and mends) the registry ``key`` on ``client``.

    ``shards(name)`` gives the plain queues behind queue ``name``; ``tags`` maps
    the hash tag of each shard of a sharded queue to the queue's name (for the
    rebuild); ``excluded`` are
    the names a backend lists in its own ``QUEUES`` (never added by the rebuild).
    """

    def __init__(
        self,
        client: Any,
        key: str,
        shards: Callable[[str], Sequence[Queue]],
        *,
        batch: int = 500,
        tags: Mapping[str, str] | None = None,
        excluded: Collection[str] = (),
    ) -> None:
        self.r = client
        self.key = key
        self.shards = shards
        self.batch = batch
        self.tags = dict(tags or {})
        self.excluded = set(excluded)

    def audit(self) -> Report:
        """Find what is wrong; change nothing."""
        return self._pass(repair=False)

    def repair(self) -> tuple[Report, Report]:
        """Mend what is wrong; what the repair pass found, and a fresh audit."""
        found = self._pass(repair=True)
        return found, self.audit()

    def _pass(self, repair: bool) -> Report:
        report = Report(self.key)
        kind = text(self.r.type(self.key))
        if kind not in ("set", "none"):
            if not repair:
                report.add(Finding("registry-type", self.key, f"a {kind}, not a set"))
                return report
            if SyncRunner(self.r).script(doctor_calls.mend_key(self.key, "set")):
                report.mended += 1
            rebuilt = self._rebuild()
            detail = f"a {kind}, not a set: deleted, rebuilt from the keyspace: {rebuilt} name(s)"
            report.add(Finding("registry-type", self.key, detail))
        # each member read as text, removed as the server holds it (one that is
        # not UTF-8 shows U+FFFD in its report and is removed all the same)
        for raw in sorted(self.r.smembers(self.key), key=text):
            name = text(raw)
            report.keys += 1
            try:
                validate_queue_name(name)
            except ValueError:
                report.add(Finding("registry-name", self.key, f"not a queue name: {name!r}"))
                if repair and self.r.srem(self.key, raw):
                    report.mended += 1
                continue
            if self._holds_keys(name):
                continue
            report.add(Finding("registry-empty", name, "its queue holds no keys"))
            if repair and self.r.srem(self.key, name):
                report.mended += 1
                if self._holds_keys(name):  # a job came meanwhile
                    self.r.sadd(self.key, name)
                    report.mended -= 1
        return report

    def _holds_keys(self, name: str) -> bool:
        """Whether any shard of queue ``name`` holds a key but the workers': one
        look at its fixed keys, else a scan of its prefix that stops at the first
        such key (on an empty queue, a walk of the keyspace in batches)."""
        for queue in self.shards(name):
            keys = queue.keys
            fixed = [getattr(keys, a) for a in FIXED_KEY_TYPES if a not in WORKER_KEYS]
            if self.r.exists(*fixed):
                return True
            theirs = {getattr(keys, a) for a in WORKER_KEYS}
            pattern = _glob_escape(keys.prefix) + "*"
            for raw in self.r.scan_iter(match=pattern, count=self.batch):
                if text(raw) not in theirs:
                    return True
        return False

    def _rebuild(self) -> int:
        """Add the name of every queue holding keys (but the ``excluded``); how many."""
        names = {self.tags.get(tag, tag) for tag in self._tags()} - self.excluded
        valid = []
        for name in sorted(names):
            try:
                valid.append(validate_queue_name(name))
            except ValueError:
                continue
        if valid:
            self.r.sadd(self.key, *valid)
        return len(valid)

    def _tags(self) -> Iterator[str]:
        """The hash tags of every queue key in the keyspace (``emq:{tag}:...``)."""
        for raw in self.r.scan_iter(match="emq:{*}:*", count=self.batch):
            key = text(raw)
            tag, closed, _ = key.removeprefix("emq:{").partition("}")
            if closed:
                yield tag
