"""Delta storage (docs/architecture.md#storage): versions stored as zstd deltas against a full copy,
bounded chains, one query per source read, sweeping that keeps what a delta needs, and re-packing in
place."""

from __future__ import annotations

import hashlib
import importlib

from django.apps import apps as django_apps
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from versions import selectors, services
from versions.models import CHAIN_MAX, App, Artifact, Blob, RestorePoint

LINES = [f".rule-{i} {{ padding: {i % 7}px; color: #{i * 4099:06x}; }}\n" for i in range(80)]
BASE = "".join(LINES)
# Unlike BASE and unlike itself line to line: nothing to gain from a delta.
REWRITE = "".join(f"/* {hashlib.sha256(str(i).encode()).hexdigest()} */\n" for i in range(40))


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def write(app: App, text: str, name: str = "App") -> None:
    services.write_artifact(app, "pltf_stylesheet", name, text, requested_by="t", tool="test")


def edited(lines: list[str], i: int, at: int) -> list[str]:
    """``lines`` with line ``at`` replaced, as a one-line edit ``i``."""
    out = list(lines)
    out[at % len(out)] = f".edit-{i} {{ margin: {i}px; }}\n"
    return out


def write_versions(app: App, count: int, name: str = "App") -> list[str]:
    """Write ``count`` versions, each one line away from the one before; their texts."""
    lines, texts = [f"/* {app.slug} {name} */\n", *LINES], []
    for i in range(count):
        lines = edited(lines, i, i * 7) if i else lines
        texts.append("".join(lines))
        write(app, texts[-1], name)
    return texts


def assert_reads_back(texts: list[str]) -> None:
    """Every text reads back byte for byte through each way sources are read."""
    shas = [sha(t) for t in texts]
    sources = selectors.blob_sources(shas)
    for text, digest in zip(texts, shas, strict=True):
        assert sources[digest] == text.encode()
        assert Blob.objects.get(sha256=digest).text == text


def test_versions_after_the_first_are_stored_as_small_deltas_against_a_full_copy(app):
    texts = write_versions(app, 5)
    first = Blob.objects.get(sha256=sha(texts[0]))
    assert first.base_id is None and first.chain == 0
    for chain, text in enumerate(texts[1:], start=1):
        blob = Blob.objects.get(sha256=sha(text))
        assert (blob.base_id, blob.chain) == (first.sha256, chain)
        assert len(blob.data) < len(text) // 10  # a one-line edit costs bytes, not kilobytes
    assert_reads_back(texts)


def test_a_full_copy_is_stored_at_least_every_16_versions(app):
    texts = write_versions(app, 50)
    blobs = [Blob.objects.get(sha256=sha(t)) for t in texts]
    assert [b.chain for b in blobs] == [i % (CHAIN_MAX + 1) for i in range(50)]
    for blob in blobs:
        assert blob.chain <= CHAIN_MAX
        if blob.base_id is not None:  # a delta's base is always a full copy: one step to read
            assert Blob.objects.get(sha256=blob.base_id).base_id is None
    assert_reads_back(texts)


def test_small_sources_and_rewrites_are_stored_whole(app):
    write(app, "tiny v1")
    write(app, "tiny v2")
    write(app, BASE)
    write(app, REWRITE)
    for text in ("tiny v2", BASE, REWRITE):
        assert Blob.objects.get(sha256=sha(text)).base_id is None


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(st.sampled_from(["edit", "insert", "delete", "restore"]), st.integers(0, 999)),
        min_size=1,
        max_size=40,
    )
)
def test_every_version_of_a_random_edit_sequence_reads_back_byte_for_byte(app, steps):
    lines, texts = list(LINES), ["".join(LINES)]
    name = f"s{len(Artifact.objects.filter(app=app))}"
    write(app, texts[0], name)
    for i, (kind, at) in enumerate(steps):
        if kind == "edit":
            lines = edited(lines, i, at)
        elif kind == "insert":
            lines.insert(at % (len(lines) + 1), f"/* é {i} ✓ */\n")
        elif kind == "delete" and len(lines) > 1:
            del lines[at % len(lines)]
        elif kind == "restore":  # back to an earlier version: a re-point, then edits on it
            lines = texts[at % len(texts)].splitlines(keepends=True)
        texts.append("".join(lines))
        write(app, texts[-1], name)
    assert_reads_back(texts)
    for blob in Blob.objects.filter(base__isnull=False):
        assert 1 <= blob.chain <= CHAIN_MAX and blob.base.base_id is None
    # Every point's previous source and the artifact's current one read back too.
    artifact = Artifact.objects.get(app=app, name=name)
    assert artifact.source == texts[-1]
    previous = [p.previous_source for p in RestorePoint.objects.filter(artifact=artifact)]
    assert set(previous) <= {"", *texts}


def test_reading_a_delta_is_one_query(app, django_assert_num_queries):
    texts = write_versions(app, 10)
    last = sha(texts[-1])
    assert Blob.objects.filter(sha256=last, base__isnull=False).exists()
    with django_assert_num_queries(1):
        assert Blob.objects.get(sha256=last).text == texts[-1]
    with django_assert_num_queries(1):
        assert selectors.blob_sources([sha(t) for t in texts])[last] == texts[-1].encode()
    artifact = Artifact.objects.get(app=app)
    with django_assert_num_queries(1):
        assert artifact.source == texts[-1]
    point = RestorePoint.objects.filter(artifact=artifact).order_by("-created_on").first()
    assert point is not None
    with django_assert_num_queries(1):
        assert point.previous_source == texts[-2]


def test_a_write_reads_the_previous_delta_with_its_lock(app):
    write_versions(app, 3)
    with CaptureQueriesContext(connection) as first:
        write(app, BASE + "/* one more */\n")
    with CaptureQueriesContext(connection) as again:
        write(app, BASE + "/* and one more */\n")
    # Writing after a delta costs no more statements than writing after a full copy.
    assert len(again.captured_queries) == len(first.captured_queries)


@override_settings(VERSIONS_POINTS_PER_APP=3, VERSIONS_SWEEP_BATCH=1)
def test_sweeping_keeps_a_full_copy_a_delta_still_needs(app, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        texts = write_versions(app, 8)
    full = sha(texts[0])
    # The first version's points are pruned, but the newest versions are deltas against it.
    assert not RestorePoint.objects.filter(previous_blob_id=full).exists()
    assert not Artifact.objects.filter(blob_id=full).exists()
    assert Blob.objects.filter(sha256=full).exists()
    assert not Blob.objects.filter(sha256=sha(texts[1])).exists()  # no one needs it: swept
    assert_reads_back(texts[-4:])


@override_settings(VERSIONS_POINTS_PER_APP=2, VERSIONS_SWEEP_BATCH=1)
def test_a_full_copy_goes_with_the_last_delta_that_needed_it(
    app, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        texts = write_versions(app, 3)
        for i in range(4):  # something else pushes the old chain out
            write(app, REWRITE + f"/* {i} */\n")
    assert not Blob.objects.filter(sha256__in=[sha(t) for t in texts]).exists()
    referenced = set(Artifact.objects.values_list("blob_id", flat=True)) | set(
        RestorePoint.objects.values_list("previous_blob_id", flat=True)
    )
    needed = set(Blob.objects.filter(base__isnull=False).values_list("base_id", flat=True))
    assert set(Blob.objects.values_list("sha256", flat=True)) == (referenced | needed) - {None}


def _unpack_everything() -> None:
    """Turn every blob back into a full copy, as blobs stored before delta storage were."""
    for blob in list(Blob.objects.filter(base__isnull=False)):
        raw = blob.raw
        Blob.objects.filter(sha256=blob.sha256).update(data=raw, base=None, chain=0)


def _stored() -> dict[str, tuple[bytes, str | None, int]]:
    return {b.sha256: (bytes(b.data), b.base_id, b.chain) for b in Blob.objects.all()}


def test_repacking_converts_history_in_place_and_can_resume(db):
    apps = [App.objects.create(slug=f"app-{i}", name="A") for i in range(3)]
    texts = {a.slug: write_versions(a, 20, name="App") for a in apps}
    texts["app-0"] += write_versions(apps[0], 20, name="Other")
    _unpack_everything()
    assert not Blob.objects.filter(base__isnull=False).exists()
    half = services.repack_blobs(limit=2, batch=1)  # interrupted after two artifacts
    assert half.artifacts == 2 and half.repacked > 0
    after_half = _stored()
    rest = services.repack_blobs()
    assert rest.repacked > 0
    # Nothing the first run did is done again; a third run finds nothing to do.
    assert all(_stored()[s] == v for s, v in after_half.items() if v[1] is not None)
    assert services.repack_blobs().repacked == 0
    for blob in Blob.objects.filter(base__isnull=False):
        assert blob.chain <= CHAIN_MAX and blob.base.base_id is None
    # An artifact's current source stays a full copy; history is deltas; all reads back.
    for artifact in Artifact.objects.all():
        assert artifact.blob.base_id is None
    assert Blob.objects.filter(base__isnull=False).count() >= 3 * 18
    for slug_texts in texts.values():
        assert_reads_back(slug_texts)


def test_the_data_migration_runs_twice_on_a_half_converted_table(app):
    texts = write_versions(app, 30)
    _unpack_everything()
    services.repack_blobs(limit=0)
    migration = importlib.import_module("versions.migrations.0011_delta_repack")
    migration.repack(django_apps, None)
    once = _stored()
    migration.repack(django_apps, None)
    assert _stored() == once
    # All but the current version and the full copies of the 1st and 17th.
    assert sum(1 for _, base, _ in once.values() if base) == 27
    assert_reads_back(texts)


def test_writes_after_a_repack_continue_the_chains(app):
    texts = write_versions(app, 6)
    _unpack_everything()
    services.repack_blobs()
    texts += write_versions(app, 3)
    assert_reads_back(texts)


def test_repack_blobs_command_repacks_one_app(app, capsys):
    other = App.objects.create(slug="other", name="Other")
    write_versions(app, 5)
    write_versions(other, 5)
    _unpack_everything()
    call_command("repack_blobs", app="quotes")
    out = capsys.readouterr().out
    assert out.startswith("Re-packed 3 blobs of 1 artifacts")
    assert Blob.objects.filter(base__isnull=False).count() == 3
