"""URLs for the tests: a view that enqueues with a plain task.enqueue() (the
middleware test), and the admin (the lane view's tests)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, JsonResponse
from django.urls import include, path

from tests.tasks import record


def enqueue_view(request: HttpRequest) -> JsonResponse:
    result = record.enqueue("from-view")
    return JsonResponse({"id": result.id})


urlpatterns = [
    path("enqueue/", enqueue_view),
    path("admin/", admin.site.urls),
    path("emq/", include("django_emq.urls")),
]
