"""Protection per app (docs/architecture.md#protection): a pre-flight rule of promotion on the
one engine refuses a state whose change sets lack approvals or carry an open change request,
names which sets lack what, and lets an owner promote anyway with a reason kept in the
deployment's note and the audit trail."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from versions import messages, services
from versions.errors import Forbidden, PreflightFailed
from versions.messages import (
    FINDING_PROTECTED,
)
from versions.models import PAGE, App, AuditEvent, DeploymentEvent


def person(app: App, name: str, role: str) -> services.Actor:
    User.objects.create_user(name, password=None)
    services.add_member(app, role=role, username=name, by="setup")
    return services.actor_for_user(User.objects.get(username=name))


def turn(app: App, source: str, run: str, by: str = "ada") -> str:
    receipt = services.write_artifact(
        app, PAGE, "index", source, requested_by=by, tool="t", run_id=run
    )
    assert receipt.change_set_id
    return receipt.change_set_id


@pytest.fixture
def protected(app):
    turn(app, "v1\n", "first")
    services.promote(app, by="setup")
    owner = person(app, "olga", "owner")
    services.change_app(
        app,
        actor=owner,
        protection={
            "required_approvals": 1,
            "block_on_changes_requested": True,
            "dismiss_stale": True,
        },
    )
    return app


def production(app: App) -> str | None:
    return App.objects.get(pk=app.pk).production_id


def test_without_required_approvals_promotion_is_as_before(app):
    turn(app, "v1\n", "first")
    assert services.promote(app, by="setup").kind == "promotion"


def test_an_unreviewed_set_is_refused_by_name_and_nothing_is_promoted(protected):
    before = production(protected)
    set_id = turn(protected, "v2\n", "second")
    promoter = person(protected, "pia", "promoter")
    with pytest.raises(PreflightFailed) as refused:
        services.promote(protected, actor=promoter)
    [finding] = refused.value.receipt.findings
    lacks = "it needs 1 more approval from someone other than its authors"  # named once
    assert (finding.name, finding.reason) == (set_id, FINDING_PROTECTED.format(lacks=lacks))
    assert production(protected) == before
    assert AuditEvent.objects.filter(action="promotion_refused").count() == 1


def test_an_approval_by_someone_else_lets_the_promotion_through(protected):
    set_id = turn(protected, "v2\n", "second")
    services.submit_review(set_id, verdict="approve", actor=person(protected, "rita", "reviewer"))
    receipt = services.promote(protected, actor=person(protected, "pia", "promoter"))
    assert receipt.kind == "promotion" and production(protected) == receipt.deployment_id


def test_a_stale_approval_and_an_authors_own_approval_do_not_count(protected):
    set_id = turn(protected, "v2\n", "second", by="ada")
    services.submit_review(set_id, verdict="approve", actor=person(protected, "rita", "reviewer"))
    services.submit_review(set_id, verdict="approve", actor=person(protected, "ada", "reviewer"))
    turn(protected, "v3\n", "second")  # joins the set: rita's approval is stale
    dry = services.promote(protected, by="x", dry_run=True)
    assert [f.name for f in dry.findings] == [set_id]


def test_an_open_change_request_blocks_until_its_author_approves(protected):
    set_id = turn(protected, "v2\n", "second")
    rita = person(protected, "rita", "reviewer")
    services.submit_review(set_id, verdict="approve", actor=person(protected, "tom", "reviewer"))
    services.submit_review(set_id, verdict="request_changes", body="Not yet.", actor=rita)
    dry = services.promote(protected, by="x", dry_run=True)
    assert "has changes requested by rita" in dry.findings[0].reason
    services.submit_review(set_id, verdict="approve", actor=rita)
    assert services.promote(protected, by="x", dry_run=True).findings == []


def test_only_sets_after_production_that_the_promotion_changes_are_asked_about(protected):
    first = protected.change_sets.get().id
    second = turn(protected, "v2\n", "second")
    dry = services.promote(protected, by="x", dry_run=True)
    assert [f.name for f in dry.findings] == [second] and first != second


def test_a_state_of_an_earlier_set_asks_only_about_sets_up_to_it(protected):
    second = turn(protected, "v2\n", "second")
    turn(protected, "v3\n", "third")
    dry = services.promote(protected, by="x", ref=second, dry_run=True)
    assert [f.name for f in dry.findings] == [second]


def test_an_owner_promotes_anyway_with_a_reason_kept_in_the_history_and_audit(protected):
    set_id = turn(protected, "v2\n", "second")
    olga = services.actor_for_user(User.objects.get(username="olga"))
    receipt = services.promote(protected, actor=olga, override_reason="Hotfix for the outage")
    assert receipt.kind == "promotion"
    event = DeploymentEvent.objects.get(to_deployment_id=receipt.deployment_id)
    assert event.note == "Promoted anyway: Hotfix for the outage"
    overridden = AuditEvent.objects.get(action="protection_overridden")
    assert overridden.reason == "Hotfix for the outage" and overridden.targets == [set_id]
    [promoted] = [
        e
        for e in AuditEvent.objects.filter(action="promoted")
        if receipt.deployment_id in e.targets
    ]
    assert promoted.reason == "Promoted anyway: Hotfix for the outage"


def test_a_promoter_who_is_not_an_owner_cannot_promote_anyway(protected):
    before = production(protected)
    turn(protected, "v2\n", "second")
    with pytest.raises(Forbidden) as refused:
        services.promote(
            protected, actor=person(protected, "pia", "promoter"), override_reason="please"
        )
    assert refused.value.message == messages.OVERRIDE_NOT_OWNER.format(slug=protected.slug)
    assert production(protected) == before


def test_a_promotion_that_changes_nothing_asks_for_no_review(protected):
    dry = services.promote(protected, by="x", dry_run=True)
    assert dry.findings == [] and dry.message.startswith("Production already serves")


def test_the_settings_page_is_for_owners_and_saves_protection(protected, client):
    url = f"/apps/{protected.slug}/versions/settings/"
    client.force_login(User.objects.get(username="olga"))
    page = client.get(url)
    assert page.status_code == 200
    assert b"Required approvals" in page.content and b'value="1"' in page.content
    saved = client.post(url, {"required_approvals": "2", "dismiss_stale": "on"})
    assert saved.status_code == 302
    protection = App.objects.get(pk=protected.pk).protection
    assert (protection.required_approvals, protection.block_on_changes_requested) == (2, False)
    refused = client.post(url, {"required_approvals": "9"})
    assert refused.status_code == 422 and b"less than or equal to 5" in refused.content
    assert App.objects.get(pk=protected.pk).protection.required_approvals == 2
    client.force_login(person(protected, "pia", "promoter").user)
    assert client.get(url).status_code == 403


def test_the_promote_dialog_names_what_protection_needs_and_an_owner_promotes_anyway(
    protected, client
):
    set_id = turn(protected, "v2\n", "second")
    before = production(protected)
    url = f"/apps/{protected.slug}/versions/production/promote/"
    client.force_login(person(protected, "pia", "promoter").user)
    dialog = client.get(url, {"ref": "draft"}).content.decode()
    assert "Protection still needs reviews of 1 change set" in dialog and set_id in dialog
    assert "Promote anyway" not in dialog and "Confirm promotion" not in dialog
    refused = client.post(url, {"ref": "draft"})
    assert refused.status_code == 409 and production(protected) == before
    assert "needs 1 more approval" in refused.content.decode()
    client.force_login(User.objects.get(username="olga"))
    dialog = client.get(url, {"ref": "draft"}).content.decode()
    assert "Promote anyway" in dialog and 'name="override_reason"' in dialog
    done = client.post(url, {"ref": "draft", "override_reason": "Hotfix"})
    assert done.status_code == 302 and production(protected) != before


def test_a_token_that_may_promote_is_bound_by_protection_and_never_overrides(protected):
    from versions.services import create_agent_token

    turn(protected, "v2\n", "second")
    _, row = create_agent_token("olga", [protected.slug], can_promote=True)
    token = services.actor_for_token(row)
    with pytest.raises(PreflightFailed):
        services.promote(protected, actor=token)
    with pytest.raises(Forbidden):
        services.promote(protected, actor=token, override_reason="trust me")
    assert AuditEvent.objects.filter(action="protection_overridden").count() == 0
