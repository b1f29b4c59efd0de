"""URLs for machines: mount them where you like, e.g.
``path("emq/", include("django_emq.urls"))`` gives ``/emq/metrics`` (the
Prometheus text format) and ``/emq/stats`` (JSON). Each needs a bearer
token equal to ``EMQ["METRICS_TOKEN"]`` or a logged-in user with
``django_emq.view_lanes``."""

from __future__ import annotations

from django.urls import path

from .metrics import metrics_view, stats_view

app_name = "django_emq"

urlpatterns = [
    path("metrics", metrics_view, name="metrics"),
    path("stats", stats_view, name="stats"),
]
