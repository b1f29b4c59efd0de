"""Where every upstream task-contract test stands against django-emq.

Every test method of Django's ``tests/tasks`` (the installed Django's) and of the
``tests/tests.py`` of django-tasks-db and django-tasks-rq has one verdict here,
and ``test_ledger.py`` checks that none is missing and none is stale:

- ``Verbatim``: run unedited by ``test_django_tasks.py`` and passes;
- ``Fails``: run unedited and fails on purpose, for the reason given, which
  docs/compatibility.md states under ``section`` (the tests are strict expected
  failures: one that starts passing fails the suite);
- ``Ported``: rewritten in ``tests/contract/<module>`` under the same name (or,
  where two reference suites hold the same test under two names, the other's),
  asserting the same things through a worker and a lane;
- ``NotApplicable``: tests something the other backend has and django-emq has
  not (or has differently), in one line; in a class run unedited, such a test
  is left out of the run (deselected, named with that reason in the summary).

A class may carry one verdict for all its tests under ``"*"``; a test's own
entry wins over it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Verbatim:
    """Run unedited against FairLanesBackend, passing."""


@dataclass(frozen=True)
class Fails:
    """Run unedited, failing on purpose."""

    reason: str
    #: The heading of docs/compatibility.md that states the difference.
    section: str
    #: It fails inside ``subTest``s: each subtest is an expected failure, and the
    #: test itself ends passed, so its mark cannot be strict.
    in_subtests: bool = False


@dataclass(frozen=True)
class Ported:
    """Rewritten in ``tests/contract/<module>``."""

    module: str
    #: The contract test's name when it is not the upstream test's own.
    name: str | None = None


@dataclass(frozen=True)
class NotApplicable:
    """Tests what another backend has and django-emq has not."""

    reason: str


Verdict = Verbatim | Fails | Ported | NotApplicable

RUN_UNEDITED = "Django's tests, run unedited"
DIFFERENCES = "Deliberate differences"

_PRIORITY = Fails(
    "sets priority=; ours refuses any priority, pointing to lane weights", DIFFERENCES
)
_DUMMY_RESULTS = Fails("reads DummyBackend.results, the list that backend keeps", RUN_UNEDITED)
_DUMMY_RESULTS_IN_SUBTESTS = Fails(
    "reads DummyBackend.results, the list that backend keeps", RUN_UNEDITED, in_subtests=True
)
_OWN_OVERRIDE = NotApplicable(
    "its own override_settings inside the test names DummyBackend (run, it would test "
    "Django's backend); ours: tests/contract/test_backend.py, same name"
)
_INTERVAL = "db_worker's --interval; ours: test_negative_or_zero_options_are_refused"
_IMMEDIATE_RUN = Fails("needs the task run inside enqueue (ImmediateBackend)", RUN_UNEDITED)

#: Upstream file -> class -> test (or "*") -> verdict. Files are named as
#: ``Upstream.name`` plus the path below its ``folder``.
LEDGER: dict[str, dict[str, dict[str, Verdict]]] = {
    "django/test_tasks.py": {
        "TaskTestCase": {
            "*": Verbatim(),
            "test_using_correct_backend": Fails(
                "asserts the backend is a DummyBackend", RUN_UNEDITED
            ),
            "test_get_backend": Fails(
                "asserts the backends are a DummyBackend and an ImmediateBackend", RUN_UNEDITED
            ),
            "test_enqueue_task": _DUMMY_RESULTS,
            "test_enqueue_task_async": _DUMMY_RESULTS,
            "test_task_error_invalid_exception": _IMMEDIATE_RUN,
            "test_task_error_unknown_module": _IMMEDIATE_RUN,
            "test_using_priority": _PRIORITY,
            "test_chained_using": _PRIORITY,
            "test_invalid_priority": _PRIORITY,
        },
    },
    "django/test_immediate_backend.py": {
        "ImmediateBackendTestCase": {
            "test_using_correct_backend": Ported("test_backend.py"),
            "test_enqueue_task": NotApplicable(
                "asserts the task ran inside enqueue; ours: test_worker.py::test_run_enqueued_task"
            ),
            "test_enqueue_task_async": NotApplicable(
                "asserts the task ran inside aenqueue; ours: test_worker.py::test_run_enqueued_task"
            ),
            "test_catches_exception": Ported("test_worker.py"),
            "test_throws_keyboard_interrupt": NotApplicable(
                "KeyboardInterrupt raised out of enqueue, where the task ran; ours: "
                "test_process.py::test_keyboard_interrupt_task"
            ),
            "test_complex_exception": Ported("test_worker.py"),
            "test_complex_return_value": Ported("test_worker.py"),
            "test_result": Ported("test_worker.py"),
            "test_result_async": NotApplicable(
                "the result of a task run inside aenqueue; ours: test_worker.py::test_result"
            ),
            "test_cannot_get_result": NotApplicable("ImmediateBackend keeps no results; ours does"),
            "test_cannot_refresh_result": NotApplicable(
                "ImmediateBackend keeps no results; ours does"
            ),
            "test_cannot_pass_run_after": NotApplicable(
                "ImmediateBackend has no run_after; ours has (test_worker.py::test_run_after)"
            ),
            "test_enqueue_logs": NotApplicable(
                "three lines from one enqueue that also runs the task; ours: "
                "test_backend.py::test_enqueue_logs and test_worker.py::test_started_finished_logs"
            ),
            "test_failed_logs": Ported("test_worker.py"),
            "test_successful_task_no_none_in_logs": Ported("test_worker.py"),
            "test_takes_context": Ported("test_worker.py"),
            "test_context": Ported("test_worker.py"),
            "test_validate_on_enqueue": Ported("test_backend.py"),
            "test_validate_on_aenqueue": Ported("test_backend.py"),
        },
        "ImmediateBackendTransactionTestCase": {
            "*": NotApplicable("the task run inside enqueue inside a database transaction"),
        },
    },
    "django/test_dummy_backend.py": {
        "DummyBackendTestCase": {
            "*": Verbatim(),
            "test_using_correct_backend": Fails(
                "asserts the backend is a DummyBackend", RUN_UNEDITED
            ),
            "test_enqueue_task": _DUMMY_RESULTS_IN_SUBTESTS,
            "test_enqueue_task_async": _DUMMY_RESULTS_IN_SUBTESTS,
            "test_refresh_result": Fails(
                "edits the result DummyBackend keeps in its results list", RUN_UNEDITED
            ),
            "test_refresh_result_async": Fails(
                "edits the result DummyBackend keeps in its results list", RUN_UNEDITED
            ),
            "test_clear": Fails(
                "DummyBackend.clear() forgets every result; ours keeps them RESULT_TTL",
                RUN_UNEDITED,
            ),
            "test_validate_on_enqueue": _OWN_OVERRIDE,
            "test_validate_on_aenqueue": _OWN_OVERRIDE,
        },
        "DummyBackendTransactionTestCase": {
            "*": NotApplicable("DummyBackend's results inside a database transaction"),
        },
    },
    "django/test_custom_backend.py": {
        "CustomBackendTestCase": {
            "*": NotApplicable("BaseTaskBackend with the test's own backend classes, not ours"),
        },
        "CustomTaskTestCase": {
            "*": NotApplicable("Task subclasses of the test's own backend class, not ours"),
        },
    },
    "django-tasks-db/tests.py": {
        "DatabaseBackendTestCase": {
            "test_using_correct_backend": Ported("test_backend.py"),
            "test_enqueue_task": Ported("test_backend.py"),
            "test_enqueue_task_async": Ported("test_backend.py"),
            "test_get_result": Ported("test_backend.py"),
            "test_get_result_async": Ported("test_backend.py"),
            "test_refresh_result": Ported("test_worker.py"),
            "test_refresh_result_async": Ported("test_worker.py"),
            "test_get_missing_result": Ported("test_backend.py"),
            "test_async_get_missing_result": Ported("test_backend.py"),
            "test_invalid_uuid": Ported("test_backend.py"),
            "test_async_invalid_uuid": Ported("test_backend.py"),
            "test_invalid_task_path": Ported("test_backend.py"),
            "test_missing_task_path": Ported("test_backend.py"),
            "test_task_name": NotApplicable("the task_name column of django-tasks-db's model"),
            "test_check": Ported("test_backend.py"),
            "test_database_backend_app_missing": NotApplicable(
                "django_tasks_db missing from INSTALLED_APPS"
            ),
            "test_priority_range_check": NotApplicable(
                "a database constraint on priority; ours has no priority"
            ),
            "test_doesnt_wait_until_transaction_commit": NotApplicable(
                "row visibility across database connections inside a transaction"
            ),
            "test_enqueue_logs": Ported("test_backend.py"),
            "test_index_scan_for_ready": NotApplicable("the database's query plan"),
            "test_run_after_tz": NotApplicable("the run_after column under USE_TZ=False"),
            "test_run_after_null_0016_migration": NotApplicable("a django-tasks-db migration"),
            "test_validate_on_enqueue": Ported("test_backend.py"),
            "test_validate_on_aenqueue": Ported("test_backend.py"),
            "test_custom_id_function": NotApplicable(
                "django-tasks-db's id function setting; ours mints ordered JOB ids"
            ),
            "test_unknown_id_function": NotApplicable(
                "django-tasks-db's id function setting; ours mints ordered JOB ids"
            ),
            "test_postgres_db_id_function": NotApplicable("PostgreSQL's uuid function"),
            "test_postgres_id_function_expression": NotApplicable("PostgreSQL's uuid function"),
        },
        "DatabaseBackendWorkerTestCase": {
            "test_run_enqueued_task": Ported("test_worker.py"),
            "test_batch_processes_all_tasks": Ported("test_worker.py"),
            "test_no_tasks": Ported("test_worker.py"),
            "test_doesnt_process_different_queue": Ported("test_worker.py"),
            "test_process_all_queues": Ported("test_worker.py"),
            "test_process_all_queues_excluding_one_queue": NotApplicable(
                "db_worker's --exclude-queue; run_emq_worker names the queues it serves"
            ),
            "test_exclude_queues_requires_processing_all_queues": NotApplicable(
                "db_worker's --exclude-queue; run_emq_worker names the queues it serves"
            ),
            "test_excluding_unknown_queue_processes_selected_queues": NotApplicable(
                "db_worker's --exclude-queue; run_emq_worker names the queues it serves"
            ),
            "test_failing_task": Ported("test_worker.py", name="test_catches_exception"),
            "test_complex_exception": Ported("test_worker.py"),
            "test_complex_return_value": Ported("test_worker.py"),
            "test_doesnt_process_different_backend": Ported("test_worker.py"),
            "test_unknown_backend": Ported("test_worker.py"),
            "test_incorrect_backend": Ported("test_worker.py"),
            "test_negative_interval": NotApplicable(_INTERVAL),
            "test_infinite_interval": NotApplicable(
                "db_worker's --interval; ours: test_worker.py::test_infinite_durations_are_refused"
            ),
            "test_fractional_interval": NotApplicable(
                "db_worker's --interval (it polls the table; ours blocks on Valkey)"
            ),
            "test_zero_interval": NotApplicable(_INTERVAL),
            "test_negative_max_tasks": Ported(
                "test_worker.py", name="test_negative_or_zero_options_are_refused"
            ),
            "test_zero_max_tasks": Ported(
                "test_worker.py", name="test_negative_or_zero_options_are_refused"
            ),
            "test_too_long_worker_id": Ported("test_worker.py"),
            "test_empty_worker_id": Ported("test_worker.py"),
            "test_run_after": Ported("test_worker.py"),
            "test_run_after_priority": NotApplicable("orders due jobs by priority; ours has none"),
            "test_verbose_logging": Ported("test_worker.py"),
            "test_invalid_task_path": Ported("test_worker.py"),
            "test_missing_task_path": Ported("test_worker.py"),
            "test_worker_doesnt_exit_on_failure": Ported("test_worker.py"),
            "test_worker_with_locked_rows": NotApplicable("database row locks"),
            "test_max_tasks": Ported("test_worker.py"),
            "test_takes_context": Ported("test_worker.py"),
            "test_context": Ported("test_worker.py"),
            "test_task_import_string": Ported("test_worker.py"),
        },
        "DatabaseTaskResultTestCase": {
            "*": NotApplicable("row locks and connections of django-tasks-db's model"),
        },
        "ConnectionExclusiveTranscationTestCase": {
            "*": NotApplicable("an exclusive SQLite transaction"),
        },
        "DatabaseBackendPruneTaskResultsTestCase": {
            "*": NotApplicable(
                "the prune_db_task_results command; ours expires results after RESULT_TTL"
            ),
        },
        "DatabaseWorkerProcessTestCase": {
            "test_run_subprocess": Ported("test_process.py"),
            "test_interrupt_no_tasks": Ported("test_process.py"),
            "test_interrupt_signals": Ported("test_process.py"),
            "test_repeat_ctrl_c": Ported("test_process.py"),
            "test_kill": Ported("test_process.py"),
            "test_system_exit_task": Ported("test_process.py"),
            "test_keyboard_interrupt_task": Ported("test_process.py"),
            "test_multiple_workers": Ported("test_process.py"),
        },
        "CompatTestCase": {
            "*": NotApplicable("django-tasks-db's shim between django.tasks and its backport"),
        },
        "DBTaskResultOrderingTestCase": {
            "*": NotApplicable("the database ordering of jobs by priority; ours has none"),
        },
        "AdminTestCase": {
            "*": NotApplicable("django-tasks-db's admin; ours: tests/test_admin*.py"),
        },
    },
    "django-tasks-rq/tests.py": {
        "RQBackendTestCase": {
            "test_using_correct_backend": Ported("test_backend.py"),
            "test_enqueue_task": Ported("test_backend.py"),
            "test_enqueue_task_async": Ported("test_backend.py"),
            "test_catches_exception": Ported("test_worker.py"),
            "test_complex_exception": Ported("test_worker.py"),
            "test_complex_return_value": Ported("test_worker.py"),
            "test_get_result": Ported("test_backend.py"),
            "test_get_result_async": Ported("test_backend.py"),
            "test_refresh_result": Ported("test_worker.py"),
            "test_refresh_result_async": Ported("test_worker.py"),
            "test_get_missing_result": Ported("test_backend.py"),
            "test_async_get_missing_result": Ported("test_backend.py"),
            "test_invalid_uuid": Ported("test_backend.py"),
            "test_async_invalid_uuid": Ported("test_backend.py"),
            "test_invalid_task_path": Ported("test_backend.py"),
            "test_check": Ported("test_backend.py"),
            "test_rq_app_missing": NotApplicable("django_rq missing from INSTALLED_APPS"),
            "test_enqueue_logs": Ported("test_backend.py"),
            "test_started_finished_logs": Ported("test_worker.py"),
            "test_failed_logs": Ported("test_worker.py"),
            "test_queue_isolation": Ported("test_backend.py"),
            "test_uses_rq_queues_for_queue_names": NotApplicable("django-rq's RQ_QUEUES setting"),
            "test_unknown_queue_name": NotApplicable(
                "the check of QUEUES against RQ_QUEUES; Django's test of that name runs unedited"
            ),
            "test_takes_context": Ported("test_worker.py"),
            "test_context": Ported("test_worker.py"),
            "test_exception_classes_pop_empty_list_bug": NotApplicable(
                "a bug of django-tasks-rq's job meta"
            ),
            "test_validate_on_enqueue": Ported("test_backend.py"),
            "test_validate_on_aenqueue": Ported("test_backend.py"),
        },
        "CompatTestCase": {
            "*": NotApplicable("django-tasks-rq's shim between django.tasks and its backport"),
        },
    },
}


#: Upstream classes older Djangos do not have: (file, class) -> the first
#: Django version holding it (the stale check skips them before it).
SINCE: dict[tuple[str, str], tuple[int, int]] = {
    ("django/test_custom_backend.py", "CustomTaskTestCase"): (6, 1),
}


def verdict(source: str, cls: str, name: str) -> Verdict | None:
    """The ledger's verdict on one upstream test, or None when it has none."""
    tests = LEDGER.get(source, {}).get(cls, {})
    return tests.get(name, tests.get("*"))


def expected_failure(cls: str, name: str) -> Fails | None:
    """The verdict of a test run unedited that fails on purpose, or None."""
    for source in VERBATIM_SOURCES:
        found = verdict(source, cls, name)
        if cls in LEDGER[source] and isinstance(found, Fails):
            return found
    return None


def left_out(cls: str, name: str) -> str | None:
    """Why a test of a class run unedited is not run, or None."""
    for source in VERBATIM_SOURCES:
        if cls in LEDGER[source] and isinstance(found := verdict(source, cls, name), NotApplicable):
            return found.reason
    return None


#: The upstream files ``test_django_tasks.py`` runs unedited (the classes of
#: each that the ledger names but ``NotApplicable`` as a whole).
VERBATIM_SOURCES = ("django/test_tasks.py", "django/test_dummy_backend.py")
