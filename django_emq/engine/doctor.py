"""The keyspace doctor: audit one queue's keys against the engine's invariants,
and mend what is wrong in small atomic steps that live workers tolerate.

The audit walks the keyspace with ``SCAN`` (and each set with ``ZSCAN``,
``SSCAN``, ``HSCAN``) in batches, so its memory is bounded by the batch, not
by the queue, and no command it sends costs more than O(batch): it is safe on
a live queue of millions of jobs. Each batch is checked by a read-only script
(``lua/audit_*.lua``), atomically, so a job or a lane moving meanwhile is
never taken for damage. It checks that every job sits in exactly the places
its row's state names, that every set member has a row that puts it there,
that the depth index and the in-flight counts equal the lanes' real sizes,
that the ring holds exactly the serviceable lanes, once each, that the
pending total equals the lanes' depths, and that every key is one the engine
writes, of the type it writes.

The repair (``lua/mend_*.lua``) deletes keys of the wrong type, puts each job
where its row says (a claimed job without a lease goes back to the head of
its lane), recounts each lane, rebuilds the ring when it disagrees with its
set, and recounts the pending total. Then it audits again.

The lane policies' keys come from the registry (:data:`.policies.POLICIES`):
each policy names its keys and their types (:mod:`.keyspace`), the keys whose
members name lanes, and, when it keeps structures of its own (tenant lanes),
its own step of the pass. The policy index the hot paths read instead of the
policies' hashes is audited against them last (:mod:`.policy_index`).

Imports redis, never Django: ``manage.py emq_doctor`` is a thin shell over it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from . import calls, doctor_calls, doctor_history, policy_index
from .exceptions import CorruptKeyspace
from .ids import is_lane
from .keyspace import FIXED_KEY_TYPES, LANE_SETS, QUEUE_SETS, expected_type
from .payload import text
from .policies import POLICIES
from .policies.base import DoctorStep, same_name
from .queue import Queue

#: Rings and depth indexes up to this length are read whole (in one atomic step).
RING_LIMIT = 10_000
#: Findings a report keeps to show (all are counted).
KEPT = 1_000
#: The core's keys whose members (or fields) name lanes (``QueueKeys`` attributes).
CORE_LANE_KEYS = ("depths", "inflight", "on_ring", "paused")
#: The policies' own steps of a pass.
STEPS: tuple[DoctorStep, ...] = tuple(p.doctor for p in POLICIES if p.doctor is not None)


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing wrong: ``what`` kind of damage, the key, job or lane it is
    about (``subject``), and what was seen."""

    what: str
    subject: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.what}: {self.subject}" + (f" ({self.detail})" if self.detail else "")


@dataclass
class Report:
    """What one pass found (the first :data:`KEPT` findings, and how many in all)."""

    queue: str
    keys: int = 0
    jobs: int = 0
    lanes: int = 0
    problems: int = 0
    mended: int = 0
    findings: list[Finding] = field(default_factory=list)
    _seen: set[Finding] = field(default_factory=set, repr=False)

    @property
    def clean(self) -> bool:
        return self.problems == 0

    def add(self, finding: Finding) -> None:
        """Count ``finding``, once: a lane is checked from each key that names it."""
        if finding in self._seen:
            return
        self.problems += 1
        if len(self.findings) < KEPT:
            self.findings.append(finding)
            self._seen.add(finding)


def _batches[T](items: Iterable[T], size: int) -> Iterator[list[T]]:
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


def _glob_escape(value: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in value)


class Doctor:
    """Audits (and with ``repair=True`` mends) one queue; ``progress`` is called
    with the report after each batch of keys."""

    def __init__(
        self,
        queue: Queue,
        *,
        batch: int = 500,
        progress: Callable[[Report], None] | None = None,
    ) -> None:
        self.queue = queue
        self.keys = queue.keys
        self.r: Any = queue.connection
        self.batch = batch
        self.progress = progress or (lambda report: None)

    def audit(self) -> Report:
        """Find what is wrong; change nothing."""
        return self._pass(repair=False)

    def repair(self) -> tuple[Report, Report]:
        """Mend what is wrong; returns what the repair pass found (and mended) and
        what a fresh audit finds afterwards (clean when all is well)."""
        mended = self._pass(repair=True)
        return mended, self.audit()

    # -- one pass ---------------------------------------------------------------

    def _pass(self, repair: bool) -> Report:
        report = Report(self.queue.name)
        self._repair = repair
        self._report = report
        self._total_off = False
        if repair:
            self._fixed_types()
        for keys in _batches(self._scan(), self.batch):
            self._key_batch(keys)
            self.progress(report)
        self._entries: list[set[str]] = [set() for _ in STEPS]
        self._named_lanes()
        ring_broken = self._ring_and_total()
        self._steps()
        if repair and (ring_broken or report.problems):
            self._rebuild(ring_broken)
            self._steps()
        report.mended += policy_index.check(
            self.r, self.keys, self.batch, self._run, self._found, repair
        )
        return report

    def _run(self, call: calls.Call) -> Any:
        """Run one script; in a repair, a key of the wrong type it meets is deleted
        first (its value is none the engine wrote) and the step run again."""
        for _ in range(8):
            try:
                return self.queue.runner.script(call)
            except CorruptKeyspace as exc:
                if not self._repair or exc.key is None:
                    raise
                self._delete_wrong(exc.key, str(exc))
        return self.queue.runner.script(call)

    def _found(self, what: str, subject: str, detail: str) -> None:
        self._report.add(Finding(what, subject, detail))

    def _delete_wrong(self, key: str, detail: str) -> bool:
        """Delete ``key`` if it is not of the type it must have; whether it was."""
        kind = expected_type(self.keys, key)
        if kind is not None and self.queue.runner.script(doctor_calls.mend_key(key, kind)):
            self._report.mended += 1
            return True
        return False

    def _fixed_types(self) -> None:
        for attr, kind in FIXED_KEY_TYPES.items():
            key = getattr(self.keys, attr)
            if self.queue.runner.script(doctor_calls.mend_key(key, kind)):
                self._report.add(Finding("type", key, f"not a {kind}: deleted"))
                self._report.mended += 1

    def _scan(self) -> Iterator[str]:
        pattern = _glob_escape(self.keys.prefix) + "*"
        for raw in self.r.scan_iter(match=pattern, count=self.batch):
            yield text(raw)

    # -- keys -------------------------------------------------------------------

    def _key_batch(self, keys: list[str]) -> None:
        report, k = self._report, self.keys
        report.keys += len(keys)
        pipe = self.r.pipeline(transaction=False)
        for key in keys:
            pipe.type(key)
        kinds = [text(kind) for kind in pipe.execute()]
        jobs: list[str] = []
        lanes: set[str] = set()
        sets: list[tuple[str, str, str]] = []
        queue_sets = {getattr(k, attr): state for attr, state in QUEUE_SETS.items()}
        for key, kind in zip(keys, kinds, strict=True):
            want = expected_type(k, key)
            if kind == "none":
                continue  # gone since the SCAN (an expired result, a drained lane)
            if want is None:
                report.add(Finding("stray-key", key, f"a {kind} no part of django-emq writes"))
                continue
            if kind != want:
                deleted = self._repair and self._delete_wrong(key, kind)
                said = ": deleted" if deleted else ""
                report.add(Finding("type", key, f"a {kind}, not a {want}{said}"))
                continue
            rest = key.removeprefix(k.prefix)
            if doctor_history.is_history_key(k, key):
                report.mended += doctor_history.check(
                    self.r, k, key, self.batch, self._found, self._repair
                )
            elif rest.startswith("job:"):
                jobs.append(rest[4:])
            elif rest.startswith("g:"):
                lane, _, suffix = rest[2:].rpartition(":")
                lanes.add(lane)
                if suffix in LANE_SETS:
                    sets.append((key, LANE_SETS[suffix], lane))
            elif key in queue_sets:
                sets.append((key, queue_sets[key], ""))
        report.jobs += len(jobs)
        if jobs:
            self._jobs(jobs)
        for key, state, lane in sets:
            self._members(key, state, lane)
        report.lanes += len(lanes)
        if lanes:
            self._lanes(sorted(lanes))

    def _jobs(self, job_ids: list[str]) -> None:
        found = self.queue.runner.script(doctor_calls.audit_jobs(self.keys, job_ids))
        broken: list[tuple[str, str, str]] = []
        for i in range(0, len(found), 3):
            job_id, what, detail = (text(x) for x in found[i : i + 3])
            if what == "type":
                key = self.keys.job(job_id)
                deleted = self._repair and self._delete_wrong(key, detail)
                said = ": deleted" if deleted else ""
                self._report.add(Finding("type", key, f"a {detail}, not a hash{said}"))
                continue
            self._report.add(Finding(f"job-{what}", job_id, detail))
            if what != "row":
                broken.append((job_id, "", ""))
        if self._repair and broken:
            self._mend_jobs(broken)

    def _members(self, key: str, state: str, lane: str) -> None:
        if lane:
            where = {"pending": "pending", "active": "lane_active", "dead": "lane_dead"}[state]
        else:
            where = {"active": "active", "scheduled": "schedule", "dead": "dead"}[state]
        scanned = self.r.zscan_iter(key, count=self.batch)
        for members in _batches((text(m) for m, _ in scanned), self.batch):
            found = self.queue.runner.script(
                doctor_calls.audit_members(self.keys, key, state, lane, members)
            )
            broken = []
            for i in range(0, len(found), 3):
                job_id, what, detail = (text(x) for x in found[i : i + 3])
                self._report.add(Finding(f"member-{what}", job_id, f"in {key}; {detail}".strip()))
                broken.append((job_id, where, lane))
            if self._repair and broken:
                self._mend_jobs(broken)

    def _mend_jobs(self, broken: list[tuple[str, str, str]]) -> None:
        for chunk in _batches(broken, self.batch):
            self._report.mended += int(self._run(doctor_calls.mend_jobs(self.keys, chunk)))

    # -- lanes, the ring, the total ------------------------------------------------

    def _lanes(self, lanes: list[str]) -> None:
        for chunk in _batches(lanes, self.batch):
            found = self.queue.runner.script(doctor_calls.audit_lanes(self.keys, chunk))
            broken = []
            for i in range(0, len(found), 3):
                lane, what, detail = (text(x) for x in found[i : i + 3])
                self._report.add(Finding(what, lane, detail))
                broken.append((lane, "lane"))
            if self._repair and broken:
                self._report.mended += int(self._run(doctor_calls.mend_lanes(self.keys, broken)))

    def _named_lanes(self) -> None:
        """Lanes the index, the counts, the ring's set and the settings name: each
        must be a lane id (and is audited as a lane). A name a policy's step
        claims (a tenant's ``@<tenant>`` entry) is left to that step."""
        k = self.keys
        sources: list[tuple[str, Callable[[str], str | None]]]
        sources = [(getattr(k, attr), same_name) for attr in CORE_LANE_KEYS]
        sources += [(getattr(k, a), p.lane_of) for p in POLICIES for a in p.names_lanes]
        for key, lane_of in sources:
            if text(self.r.type(key)) != FIXED_KEY_TYPES[self._attr(key)]:
                continue  # reported (and deleted, in a repair) with the keys
            names = (lane_of(text(n)) for n in self._names(key))
            for named in _batches((n for n in names if n is not None), self.batch):
                chunk = self._claimed(named)
                lanes = [name for name in chunk if is_lane(name)]
                for name in chunk:
                    if not is_lane(name):
                        self._report.add(Finding("not-a-lane", name, f"named in {key}"))
                if self._repair and len(lanes) < len(chunk):
                    purge = [(name, "purge") for name in chunk if not is_lane(name)]
                    self._report.mended += int(self._run(doctor_calls.mend_lanes(self.keys, purge)))
                if lanes:
                    self._lanes(lanes)

    def _names(self, key: str) -> Iterator[Any]:
        """The members (or fields) of ``key``, scanned by its type."""
        kind = FIXED_KEY_TYPES[self._attr(key)]
        if kind == "zset":
            return (m for m, _ in self.r.zscan_iter(key, count=self.batch))
        if kind == "hash":
            return (f for f, _ in self.r.hscan_iter(key, count=self.batch))
        return iter(self.r.sscan_iter(key, count=self.batch))

    def _claimed(self, names: list[str]) -> list[str]:
        """``names`` but those a policy's step claims as its own entries (kept
        for that step)."""
        for step, entries in zip(STEPS, self._entries, strict=True):
            names, own = step.entries(names)
            entries.update(own)
        return names

    def _steps(self) -> None:
        """Each policy's own step (tenant lanes: each tenant's ring, entry and
        in-flight count)."""
        for step, entries in zip(STEPS, self._entries, strict=True):
            self._report.mended += step.audit(
                self.r,
                self.keys,
                self.batch,
                self._run,
                entries,
                lambda what, name, detail: self._report.add(Finding(what, name, detail)),
                self._repair,
            )

    def _attr(self, key: str) -> str:
        return next(attr for attr in FIXED_KEY_TYPES if getattr(self.keys, attr) == key)

    def _ring_and_total(self) -> bool:
        length, size, dups, unknown, absent, total, stats, misplaced = self.queue.runner.script(
            doctor_calls.audit_ring(self.keys, RING_LIMIT)
        )
        report, ring = self._report, self.keys.ring
        broken = False
        if int(length) >= 0 and int(size) >= 0 and int(length) != int(size):
            report.add(Finding("ring", ring, f"{length} entries, {size} lanes in its set"))
            broken = True
        for name, lanes in (
            ("twice", dups),
            ("not in its set", unknown),
            ("missing", absent),
            ("tenanted, yet", misplaced),
        ):
            for lane in lanes:
                report.add(Finding("ring", text(lane), f"{name} on the ring"))
                broken = True
        if int(total) >= 0:
            stated = text(stats)
            try:
                value: int | None = int(stated)
            except ValueError:
                value = None
            if value != int(total):
                where = self.keys.stats
                report.add(Finding("total", where, f"pending says {stated}, lanes hold {total}"))
                self._total_off = True
        return broken

    def _rebuild(self, ring: bool) -> None:
        """The last steps of a repair: the ring rebuilt (when it was broken) and
        every lane recounted, then the pending total."""
        rings = (
            [k for step in STEPS for k in step.rings(self.r, self.keys, self.batch)] if ring else []
        )
        self._run(doctor_calls.mend_ring(self.keys, ring=ring, total=False, tenant_rings=rings))
        start = len(self.keys.prefix) + 2
        pattern = _glob_escape(self.keys.prefix) + "g:*:pending"
        scanned = self.r.scan_iter(match=pattern, count=self.batch)
        names = (text(key)[start : -len(":pending")] for key in scanned)
        for chunk in _batches((n for n in names if is_lane(n)), self.batch):
            call = doctor_calls.mend_lanes(self.keys, [(n, "lane") for n in chunk])
            self._report.mended += int(self._run(call))
        self._run(doctor_calls.mend_ring(self.keys, ring=False, total=True))
        self._report.mended += self._total_off
