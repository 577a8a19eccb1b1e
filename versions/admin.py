"""Admin: apps, artifacts, points and sets browsable; history is never edited by hand.

Everything the admin writes goes through the services as the signed-in person's actor
(``services.actor_for_user``), never as a trusted command: the services decide, and a refusal
is shown in words with nothing saved. Artifact edits go through the capture service like every
other write (they need the owner role on the app, or a superuser).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from versions import services
from versions.errors import VersionsError
from versions.models import (
    AgentToken,
    App,
    AppMembership,
    Artifact,
    AuditEvent,
    ChangeSet,
    ReadingPreference,
    ReleaseMark,
    RestorePoint,
    ViewedMark,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    """History is read-only: no add, change or delete by hand."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _actor(request: HttpRequest) -> services.Actor:
    """The signed-in person, as the services' actor."""
    return services.actor_for_user(request.user)


class ThroughServices(admin.ModelAdmin):
    """A model the admin writes through the services: when they refuse, the refusal is shown
    in words and the person is back on the form, with nothing saved and nothing logged."""

    def refused(self, request: HttpRequest, exc: VersionsError) -> None:
        messages.error(request, exc.message)
        request._versions_refused = True  # type: ignore[attr-defined]

    @staticmethod
    def was_refused(request: HttpRequest) -> bool:
        return bool(getattr(request, "_versions_refused", False))

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        if not self.was_refused(request):
            super().save_related(request, form, formsets, change)

    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        return None if self.was_refused(request) else super().log_addition(request, obj, message)

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        return None if self.was_refused(request) else super().log_change(request, obj, message)

    def response_add(self, request: HttpRequest, obj: Any, post_url_continue: Any = None) -> Any:
        if self.was_refused(request):
            return HttpResponseRedirect(request.get_full_path())
        return super().response_add(request, obj, post_url_continue)

    def response_change(self, request: HttpRequest, obj: Any) -> HttpResponse:
        if self.was_refused(request):
            return HttpResponseRedirect(request.get_full_path())
        return super().response_change(request, obj)

    def response_delete(self, request: HttpRequest, obj_display: str, obj_id: Any) -> Any:
        if self.was_refused(request):
            return HttpResponseRedirect(request.get_full_path().removesuffix("delete/"))
        return super().response_delete(request, obj_display, obj_id)


@admin.register(App)
class AppAdmin(ThroughServices):
    """Apps: added and renamed through the services (adding one needs a superuser, renaming
    it the owner role); an app's slug, in every address, never changes."""

    list_display = ["slug", "name", "release_set", "route_generation", "created_on"]
    search_fields = ["slug", "name"]
    # A rollout's candidate and share, the watch and the lock count move only through the
    # engine and the owners' services (docs/architecture.md#safe-promotion).
    readonly_fields = [
        "release_set",
        "route_generation",
        "created_on",
        "candidate",
        "rollout_share",
        "watch_until",
        "artifact_locks",
    ]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [*self.readonly_fields, *(["slug"] if obj is not None else [])]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: App, form: Any, change: bool) -> None:
        try:
            if not change:
                obj.pk = services.add_app(obj.slug, obj.name, actor=_actor(request))[0].pk
            services.change_app(
                obj,
                name=obj.name,
                require_preconditions=obj.require_preconditions,
                actor=_actor(request),
            )
        except VersionsError as exc:
            self.refused(request, exc)


class ArtifactForm(forms.ModelForm):
    source = forms.CharField(widget=forms.Textarea(attrs={"rows": 20, "cols": 100}), required=False)

    class Meta:
        model = Artifact
        fields = ["app", "collection", "name"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["source"].initial = self.instance.source
            for field in ("app", "collection", "name"):
                self.fields[field].disabled = True


@admin.register(Artifact)
class ArtifactAdmin(ThroughServices):
    form = ArtifactForm
    list_display = ["name", "collection", "app", "deleted", "size", "updated_on", "updated_by"]
    list_filter = ["app", "collection", "deleted"]
    search_fields = ["name"]
    readonly_fields = ["sha256", "size", "deleted", "updated_on", "updated_by"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Artifact, form: Any, change: bool) -> None:
        # The admin is one more writer: it goes through the capture service, as this person.
        try:
            receipt = services.write_artifact(
                form.cleaned_data["app"],
                form.cleaned_data["collection"],
                form.cleaned_data["name"],
                form.cleaned_data["source"],
                actor=_actor(request),
                tool="admin",
            )
        except VersionsError as exc:
            self.refused(request, exc)
            return
        saved = Artifact.objects.get(
            app=form.cleaned_data["app"],
            collection=form.cleaned_data["collection"],
            name=form.cleaned_data["name"],
        )
        obj.pk = saved.pk
        if receipt.unchanged:
            messages.info(request, "The source was unchanged; no restore point was recorded.")


@admin.register(RestorePoint)
class RestorePointAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "artifact",
        "kind",
        "requested_by",
        "tool",
        "created_on",
        "lines_added",
        "lines_removed",
        "source_stored",
        "pinned",
    ]
    list_filter = ["kind", "tool", "source_stored", "pinned", "app"]
    search_fields = ["id", "artifact__name", "requested_by", "run_id", "turn_id"]
    list_select_related = ["artifact"]
    exclude = ["previous_blob"]


@admin.register(ChangeSet)
class ChangeSetAdmin(ReadOnlyAdmin):
    list_display = ["id", "app", "kind", "name", "created_by", "created_on"]
    list_filter = ["kind", "app"]
    search_fields = ["id", "name", "run_id", "turn_id"]


@admin.register(ReleaseMark)
class ReleaseMarkAdmin(ReadOnlyAdmin):
    list_display = ["app", "change_set_ref", "action", "by", "on"]


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["seq", "app", "action", "actor_kind", "actor_name", "targets", "created_on"]
    list_filter = ["action", "actor_kind", "app"]


@admin.register(AppMembership)
class AppMembershipAdmin(ThroughServices):
    """Roles per app (docs/architecture.md#access), through the members service: the same checks as
    the panel's Members page (an app keeps its last owner) and every change in the app's audit
    log."""

    list_display = ["app", "user", "group", "role", "created_by", "created_on"]
    list_filter = ["role", "app"]
    search_fields = ["app__slug", "user__username", "group__name"]
    fields = ["app", "user", "group", "role"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["app", "user", "group"] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: AppMembership, form: Any, change: bool) -> None:
        actor = _actor(request)
        try:
            if change:
                saved = services.change_role(obj.app, obj.pk, obj.role, actor=actor)
            else:
                saved = services.add_member(
                    obj.app,
                    role=obj.role,
                    username=obj.user.get_username() if obj.user is not None else None,
                    group=obj.group.name if obj.group is not None else None,
                    actor=actor,
                )
        except VersionsError as exc:
            self.refused(request, exc)
            return
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: AppMembership) -> None:
        try:
            services.remove_member(obj.app, obj.pk, actor=_actor(request))
        except VersionsError as exc:
            self.refused(request, exc)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # One at a time, through the service: a bulk delete could remove an app's last owner.
        return obj is not None and super().has_delete_permission(request, obj)


@admin.register(AgentToken)
class AgentTokenAdmin(admin.ModelAdmin):
    """Agent tokens: listed with their state and last use, revoked here (an action). Tokens are
    made by ``create_agent_token``, which shows the token once; the admin never holds one."""

    list_display = [
        "id",
        "prefix",
        "user",
        "app_slugs",
        "token_status",
        "created_on",
        "expires_on",
        "last_used_on",
        "label",
    ]
    list_filter = ["revoked", "user"]
    search_fields = ["prefix", "label", "user__username"]
    readonly_fields = [
        "user",
        "apps",
        "key_hash",
        "prefix",
        "label",
        "created_on",
        "expires_on",
        "last_used_on",
        "revoked",
    ]
    actions = ["revoke_selected"]

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).select_related("user").prefetch_related("apps")

    @admin.display(description="apps")
    def app_slugs(self, obj: AgentToken) -> str:
        return ", ".join(sorted(app.slug for app in obj.apps.all()))

    @admin.display(description="status")
    def token_status(self, obj: AgentToken) -> str:
        return obj.status()

    @admin.action(description="Revoke the selected tokens", permissions=["change"])
    def revoke_selected(self, request: HttpRequest, queryset: Any) -> None:
        """Revoke each token as this person: one who manages every app the token may act on."""
        actor = _actor(request)
        for row in queryset:
            try:
                _row, words = services.revoke_app_token(str(row.pk), actor=actor)
            except VersionsError as exc:
                messages.error(request, exc.message)
            else:
                messages.info(request, words)

    def save_model(self, request: HttpRequest, obj: AgentToken, form: Any, change: bool) -> None:
        """Every field is read-only: nothing to save (a token is revoked with the action)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class PersonalAdmin(ReadOnlyAdmin):
    """A person's own reading preferences: seen and cleared here, set only in the panel."""

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return admin.ModelAdmin.has_delete_permission(self, request, obj)


@admin.register(ReadingPreference)
class ReadingPreferenceAdmin(PersonalAdmin):
    list_display = ["user", "layout", "updated_on"]
    list_filter = ["layout"]
    search_fields = ["user__username"]


@admin.register(ViewedMark)
class ViewedMarkAdmin(PersonalAdmin):
    list_display = ["user", "key", "marked_on"]
    search_fields = ["user__username", "key"]
    list_select_related = ["user"]
