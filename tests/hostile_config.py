"""A task module that raises ``ImproperlyConfigured`` at import, as one that
checks its settings at import does (tests/test_hostile_tasks.py)."""

from django.core.exceptions import ImproperlyConfigured

raise ImproperlyConfigured("HOSTILE_API_KEY must be set")
