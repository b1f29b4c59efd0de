"""What the lanes view and the jobs view share: read-only permissions (seeing
needs ``view_lanes``, acting ``manage_lanes``), a 503 page instead of a 500
when Valkey is unreachable or a key is damaged, the queue behind a name, the
page context. Nothing changes on GET in either view."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import redis
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponseBase, HttpResponseNotAllowed
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _

from ..engine.exceptions import CorruptKeyspace, script_error
from ..engine.shards import AnyQueue
from ..exceptions import UNAVAILABLE
from .lookup import configured_queues

if TYPE_CHECKING:
    from django.db.models import Model

    ModelAdmin = admin.ModelAdmin[Model]
else:  # ModelAdmin is generic for the type checker only
    ModelAdmin = admin.ModelAdmin

VIEW_PERMISSION = "django_emq.view_lanes"
MANAGE_PERMISSION = "django_emq.manage_lanes"


class ConsoleAdmin(ModelAdmin):
    """A read-mostly admin over Valkey (its model has no table)."""

    # -- permissions ------------------------------------------------------------

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(VIEW_PERMISSION) or self.has_manage_permission(request)

    def has_manage_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(MANAGE_PERMISSION)

    def refuse_unless_managing(self, request: HttpRequest) -> HttpResponseBase | None:
        """What an action view answers a request it must not act on: without the
        manage permission, ``PermissionDenied``; not a POST, a 405; else ``None``."""
        if not self.has_manage_permission(request):
            raise PermissionDenied
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        return None

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def _require_view(self, request: HttpRequest) -> None:
        if not self.has_view_permission(request):
            raise PermissionDenied

    # -- URLs and pages ------------------------------------------------------------

    def _wrap(self, view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
        """``view`` behind the admin's login, answering a 503 page that says
        what is wrong when Valkey is unreachable or a key has the wrong type."""

        @functools.wraps(view)
        def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            try:
                return view(request, *args, **kwargs)
            except UNAVAILABLE as exc:  # on a cluster also CLUSTERDOWN, no node answering
                context = self._context(request, _("Valkey is unreachable"), error=str(exc))
                return TemplateResponse(
                    request, "admin/django_emq/unreachable.html", context, status=503
                )
            except redis.ResponseError as exc:  # a key of the wrong type (edited by hand)
                damage = script_error(exc)
                if not isinstance(damage, CorruptKeyspace):
                    raise
                context = self._context(request, _("Damaged keys"), error=str(damage))
                return TemplateResponse(
                    request, "admin/django_emq/damaged.html", context, status=503
                )

        return self.admin_site.admin_view(guarded)

    def _url(self, kind: str, *args: str) -> str:
        name = f"admin:{self.opts.app_label}_{self.opts.model_name}_{kind}"
        return reverse(name, args=args, current_app=self.admin_site.name)

    def _queue(self, name: str) -> AnyQueue:
        backend = configured_queues().get(name)
        if backend is None:
            raise Http404(_("No queue named %(name)s.") % {"name": name})
        return backend.engine(name)

    #: Seconds between the automatic refreshes of a page while something runs.
    refresh_seconds = 5

    def _refresh(self, request: HttpRequest, running: bool) -> dict[str, Any]:
        """What a page that refreshes itself while ``running`` needs: whether it
        refreshes now (``?refresh=0`` switches it off), whether to offer the
        toggle, and the toggle's link."""
        wanted = request.GET.get("refresh") != "0"
        query = request.GET.copy()
        if wanted:
            query["refresh"] = "0"
        else:
            query.pop("refresh", None)
        return {
            "refresh": running and wanted,
            "refresh_offered": running or not wanted,
            "refresh_seconds": self.refresh_seconds,
            "refresh_url": "?" + query.urlencode(),
        }

    @staticmethod
    def _next(request: HttpRequest, target: str | None, default: str) -> str:
        """``target`` (a form's ``next``) when it is a safe place to send the
        operator back to (this host, no scheme downgrade), else ``default``."""
        if target and url_has_allowed_host_and_scheme(
            target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        ):
            return target
        return default

    def _context(self, request: HttpRequest, title: str, **extra: Any) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "can_manage": self.has_manage_permission(request),
            **extra,
        }
