"""Property tests of capture: any sequence of writes, deletes and stale writes keeps history true.

For every stored point, its previous source is exactly the artifact's source just before that
write; hashes match the bytes; stale writes change nothing; retention never drops a pinned point.
"""

from __future__ import annotations

import hashlib
import itertools

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from versions import services
from versions.errors import NotFound, StaleWrite
from versions.models import App, Artifact, Blob, RestorePoint

KEYS = [("pltf_page", "index"), ("pltf_stylesheet", "App"), ("pltf_frontend_module", "main")]
LIMIT = 6
_counter = itertools.count()

sources = st.one_of(
    st.sampled_from(["", "a\n", "a\nb\n", "a\nB\n", "x" * 40, "é🚀\r\n"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")),
)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CaptureMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.app = App.objects.create(slug=f"prop-{next(_counter)}", name="Property")
        self.current: dict[tuple[str, str], str | None] = dict.fromkeys(KEYS)
        self.before: dict[str, str | None] = {}  # point id -> the source just before its write
        self.pinned: set[str] = set()
        self.last_point: str | None = None

    @rule(key=st.sampled_from(KEYS), source=sources, with_hash=st.booleans())
    def write(self, key, source, with_hash):
        current = self.current[key]
        expected = None
        if with_hash:
            expected = "" if current is None else sha(current)
        receipt = services.write_artifact(
            self.app, *key, source, requested_by="p", tool="t", expected_sha256=expected
        )
        previous = self.current[key]
        if previous == source:
            assert receipt.unchanged and receipt.restore_point_id is None
        else:
            assert not receipt.unchanged
            self.before[receipt.restore_point_id] = previous
            self.last_point = receipt.restore_point_id
        self.current[key] = source

    @rule(key=st.sampled_from(KEYS))
    def delete(self, key):
        if self.current[key] is None:
            with pytest.raises(NotFound):
                services.delete_artifact(self.app, *key, requested_by="p", tool="t")
            return
        receipt = services.delete_artifact(self.app, *key, requested_by="p", tool="t")
        self.before[receipt.restore_point_id] = self.current[key]
        self.last_point = receipt.restore_point_id
        self.current[key] = None

    @rule(
        key=st.sampled_from(KEYS),
        source=sources,
        wrong=st.text(alphabet="0123456789abcdef", min_size=1, max_size=8),
    )
    def stale_write(self, key, source, wrong):
        points_before = RestorePoint.objects.filter(app=self.app).count()
        with pytest.raises(StaleWrite) as exc:
            services.write_artifact(
                self.app, *key, source, requested_by="p", tool="t", expected_sha256="stale" + wrong
            )
        current = self.current[key]
        assert exc.value.current_sha256 == ("" if current is None else sha(current))
        assert RestorePoint.objects.filter(app=self.app).count() == points_before

    @precondition(lambda self: self.last_point is not None)
    @rule()
    def name_last_point(self):
        services.name_point(self.last_point, "keep", by="p")
        self.pinned.add(self.last_point)

    @invariant()
    def artifacts_hold_the_model(self):
        for (collection, name), source in self.current.items():
            artifact = (
                Artifact.objects.filter(app=self.app, collection=collection, name=name)
                .select_related("blob")
                .first()
            )
            if source is None:
                assert artifact is None or (artifact.deleted and artifact.sha256 == "")
            else:
                assert artifact is not None and not artifact.deleted
                assert artifact.source == source
                assert artifact.sha256 == sha(source)

    @invariant()
    def points_hold_what_was_there_before(self):
        points = RestorePoint.objects.filter(app=self.app).select_related("previous_blob")
        for point in points:
            expected = self.before[point.id]
            assert point.previous_existed == (expected is not None)
            assert point.source_stored
            assert point.previous_source == (expected or "")
            assert point.previous_sha256 == ("" if expected is None else sha(expected))
            if point.previous_blob_id:
                assert hashlib.sha256(point.previous_blob.raw).hexdigest() == point.previous_sha256

    @invariant()
    def retention_keeps_pins_and_the_newest(self):
        ids = set(RestorePoint.objects.filter(app=self.app).values_list("id", flat=True))
        assert self.pinned <= ids
        unpinned = RestorePoint.objects.filter(app=self.app, pinned=False).count()
        assert unpinned <= LIMIT
        # The newest LIMIT points are always kept: each is pinned or among the newest unpinned.
        assert set(sorted(self.before)[-LIMIT:]) <= ids

    @invariant()
    def every_referenced_blob_exists(self):
        referenced = set(
            RestorePoint.objects.filter(app=self.app, previous_blob__isnull=False).values_list(
                "previous_blob_id", flat=True
            )
        )
        assert referenced <= set(Blob.objects.values_list("sha256", flat=True))


@pytest.mark.django_db
@override_settings(VERSIONS_POINTS_PER_APP=LIMIT)
def test_capture_history_is_always_true():
    CaptureMachine.TestCase.settings = settings(
        max_examples=40,
        stateful_step_count=20,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    CaptureMachine.TestCase().runTest()
