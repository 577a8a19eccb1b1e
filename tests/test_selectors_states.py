"""versions.selectors.states: the state of an artifact at a moment, and how it is known."""

from __future__ import annotations

from django.utils import timezone

from versions import selectors, services
from versions.models import App, Artifact, RestorePoint


def _write(app: App, name: str, source: str) -> services.WriteReceipt:
    return services.write_artifact(app, "pltf_page", name, source, requested_by="a", tool="t")


def test_the_state_at_a_moment_is_the_previous_source_of_the_first_point_after_it(app):
    _write(app, "index", "v1\n")
    moment = RestorePoint.objects.latest("created_on").created_on
    second = _write(app, "index", "v2\n")
    _write(app, "index", "v3\n")
    state = selectors.state_at(Artifact.objects.get(name="index"), moment, with_source=True)
    assert state.status == selectors.STORED and state.source == "v1\n"
    assert state.point is not None and state.point.id == second.restore_point_id
    assert state.change == selectors.CHANGED and state.differs


def test_an_artifact_without_a_later_point_is_in_its_current_state(app):
    _write(app, "index", "v1\n")
    state = selectors.state_at(Artifact.objects.get(name="index"), timezone.now())
    assert state.status == selectors.CURRENT and not state.differs


def test_an_artifact_created_after_the_moment_did_not_exist_then(app):
    _write(app, "index", "v1\n")
    moment = RestorePoint.objects.get().created_on
    _write(app, "about", "new\n")
    state = next(s for s in selectors.states_at(app, moment) if s.artifact.name == "about")
    assert state.sha256 == "" and state.change == selectors.ADDED and state.existed is False
