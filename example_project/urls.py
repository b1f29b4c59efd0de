"""URLs of the example site: the game at the root, sign-in, the admin, and the
queue's metrics for Prometheus at ``/emq/metrics``."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("", include("example_project.game.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("emq/", include("django_emq.urls")),  # /emq/metrics (Prometheus), /emq/stats
]
