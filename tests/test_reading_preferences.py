"""A person's review preferences (docs/architecture.md#reviewing): the compare layout and the Viewed
marks belong to the signed-in user — kept across sign-out and sign-in, in any browser, and nobody
else's."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from versions import messages, services
from versions.errors import Forbidden, InvalidInput, NotFound
from versions.models import App, Artifact

pytestmark = pytest.mark.django_db

PASSWORD = "pw-123456"
SPLIT = 'class="diff-table split"'


def _write(app: App, name: str, source: str, run: str) -> None:
    services.write_artifact(
        app, "pltf_page", name, source, requested_by="ana", tool="t", run_id=run
    )


@pytest.fixture
def turns(app: App) -> dict[str, str]:
    """Two turns: v1 of a and b, then v2 of both."""
    from versions.models import ChangeSet

    for run, version in (("r1", "1"), ("r2", "2")):
        _write(app, "a", f"a{version}\n", run)
        _write(app, "b", f"b{version}\n", run)
    return {cs.run_id: cs.id for cs in ChangeSet.objects.filter(app=app)}


def _person(username: str) -> User:
    return User.objects.create_superuser(username, f"{username}@example.com", PASSWORD)


def _sign_in(username: str) -> Client:
    """A new browser: a new session, signed in through the sign-in form."""
    client = Client()
    response = client.post("/accounts/login/", {"username": username, "password": PASSWORD})
    assert response.status_code == 302
    return client


def _viewed(html: str, artifact: Artifact) -> bool:
    return f'data-viewed="{artifact.pk}" checked' in html


def test_layout_and_viewed_marks_outlive_sign_out_and_are_not_another_persons(app, turns):
    _person("rvaid")
    _person("mo")
    a = Artifact.objects.get(app=app, name="a")
    b = Artifact.objects.get(app=app, name="b")
    url = f"/apps/quotes/versions/compare/{turns['r1']}...draft/"

    first = _sign_in("rvaid")
    assert SPLIT in first.get(url + "?layout=split").content.decode()
    assert first.post(url + "viewed/", {"artifact": a.pk, "viewed": "1"}).status_code == 204
    first.post("/accounts/logout/")
    assert first.get(url).status_code == 302  # signed out: the session is gone

    again = _sign_in("rvaid")
    html = again.get(url).content.decode()
    assert SPLIT in html
    assert _viewed(html, a) and not _viewed(html, b)
    assert "1</span> of 2 viewed" in html
    # A file's section loaded on its own says the same.
    part = again.get(f"{url}files/{a.pk}/").content.decode()
    assert SPLIT in part and _viewed(part, a)

    other = _sign_in("mo")
    html = other.get(url).content.decode()
    assert SPLIT not in html
    assert not _viewed(html, a) and "0</span> of 2 viewed" in html
    # Another person's choices do not change the first one's.
    other.get(url + "?layout=unified")
    other.post(url + "viewed/", {"artifact": b.pk, "viewed": "1"})
    html = _sign_in("rvaid").get(url).content.decode()
    assert SPLIT in html and _viewed(html, a) and not _viewed(html, b)


def test_unmarking_is_kept_too_and_a_changed_file_is_unread_in_a_new_session(app, turns):
    _person("rvaid")
    a = Artifact.objects.get(app=app, name="a")
    url = f"/apps/quotes/versions/compare/{turns['r1']}...draft/"
    client = _sign_in("rvaid")
    client.post(url + "viewed/", {"artifact": a.pk, "viewed": "1"})
    _write(app, "a", "a3\n", "r3")
    assert not _viewed(_sign_in("rvaid").get(url).content.decode(), a)
    _write(app, "a", "a2\n", "r4")  # back to the state that was viewed
    assert _viewed(_sign_in("rvaid").get(url).content.decode(), a)
    client.post(url + "viewed/", {"artifact": a.pk})
    assert not _viewed(_sign_in("rvaid").get(url).content.decode(), a)


def test_each_person_keeps_only_the_newest_marks(app, turns, monkeypatch):
    monkeypatch.setattr("versions.services.reading.VIEWED_KEPT", 3)
    user = _person("rvaid")
    actor = services.actor_for_user(user)
    keys = [f"{app.pk}:{n}:{'0' * 64}:{'1' * 64}" for n in range(5)]
    for key in keys:
        services.mark_viewed(actor=actor, app=app, key=key, viewed=True)
    services.mark_viewed(actor=actor, app=app, key=keys[2], viewed=True)  # marked again: newest
    services.mark_viewed(actor=actor, app=app, key=keys[0], viewed=True)
    from versions.selectors import viewed_keys

    assert viewed_keys(user, keys) == {keys[0], keys[2], keys[4]}


def test_the_services_refuse_what_is_not_a_persons_preference(app):
    user = _person("rvaid")
    actor = services.actor_for_user(user)
    with pytest.raises(InvalidInput) as caught:
        services.set_reading_layout(actor=actor, layout="sideways")
    assert caught.value.message == messages.UNKNOWN_LAYOUT.format(layout="sideways")
    with pytest.raises(InvalidInput) as caught:
        services.set_reading_layout(actor=services.Actor.command(), layout="split")
    assert caught.value.message == messages.NO_PERSON
    other = App.objects.create(slug="other", name="Other")
    with pytest.raises(InvalidInput) as caught:
        services.mark_viewed(actor=actor, app=app, key=f"{other.pk}:1:a:b", viewed=True)
    assert caught.value.message == messages.BAD_VIEWED_KEY.format(slug="quotes")


def test_marking_viewed_needs_the_view_of_the_app(app):
    outsider = User.objects.create_user("mo", password=PASSWORD)
    with pytest.raises((Forbidden, NotFound)):
        services.mark_viewed(
            actor=services.actor_for_user(outsider), app=app, key=f"{app.pk}:1:a:b", viewed=True
        )
