"""Upgrading to the smaller blob table (migration 0033, docs/architecture.md#storage): a
database at 0032 holding history — full copies, a delta and its base, an artifact, a restore
point, a deployment, the sweep debt — migrates forward with every key and every byte intact,
and a restore on the converted rows works; going back gives the text keys again. On SQLite and,
when a server answers, on a scratch PostgreSQL database."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from manage_helpers import manage

ROOT = Path(__file__).resolve().parent.parent

# At 0032, through the historical models (the schema and key types of then).
FILL = """
import hashlib
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.utils import timezone
from versions.models import Blob as Current

apps = MigrationLoader(connection).project_state(("versions", "0032_safe_promotion")).apps
M = {n: apps.get_model("versions", n) for n in (
    "App", "Artifact", "Blob", "ChangeSet", "RestorePoint", "Deployment", "DeploymentEntry",
    "SweepDebt")}
now = timezone.now()
lines = [f"<li>line {i} of the page</li>" for i in range(80)]
v1 = "\\n".join(lines)
v2 = v1.replace("line 7 of", "line seven of")
big = "é" + "x" * 3000

def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()

def blob(text, base=None):
    raw = text.encode()
    if base is None:
        data, compressed = Current.pack(raw)
        return M["Blob"].objects.create(sha256=sha(text), data=data, size=len(raw),
                                        chars=len(text), compressed=compressed)
    data = Current.pack_delta(raw, sha(base), base.encode())
    assert data is not None
    return M["Blob"].objects.create(sha256=sha(text), data=data, size=len(raw), chars=len(text),
                                    base_id=sha(base), chain=1)

blob(v1); blob(v2, base=v1); blob(big)
app = M["App"].objects.create(slug="shop", name="Shop")
page = M["Artifact"].objects.create(app=app, collection="pltf_page", name="home",
                                    blob_id=sha(v2), sha256=sha(v2), size=len(v2.encode()),
                                    updated_on=now)
cs = M["ChangeSet"].objects.create(id="cs_0033", app=app, kind="change", created_on=now)
M["RestorePoint"].objects.create(
    id="rp_0033", app=app, artifact=page, kind="capture", previous_blob_id=sha(v1),
    previous_sha256=sha(v1), previous_size=len(v1.encode()), previous_existed=True,
    source_stored=True, new_sha256=sha(v2), created_on=now, change_set=cs)
dp = M["Deployment"].objects.create(id="dp_0033", app=app, ref="draft", created_on=now, size=1)
M["DeploymentEntry"].objects.create(deployment=dp, artifact=page, blob_id=sha(v1))
M["SweepDebt"].objects.create(app=app, blob_id=sha(big), change_set_id="cs_gone")
M["SweepDebt"].objects.create(app=app, blob_id="", change_set_id="cs_gone")
"""

# After the upgrade, through the current code: what the history reads as, and a restore.
FACTS = """
import hashlib, json
from django.db import connection
from versions import selectors, services
from versions.models import Artifact, Blob, DeploymentEntry, RestorePoint, SweepDebt

keys = sorted(Blob.objects.values_list("sha256", flat=True))
sources = selectors.blob_sources(keys)
facts = {
    "intact": all(hashlib.sha256(Blob.objects.get(sha256=k).raw).hexdigest() == k for k in keys),
    "read_back": all(hashlib.sha256(sources[k]).hexdigest() == k for k in keys),
    "bases": sorted(b for b in Blob.objects.values_list("base_id", flat=True) if b),
    "keys": keys,
    "artifact": Artifact.objects.get(name="home").blob_id,
    "point": RestorePoint.objects.get(id="rp_0033").previous_blob_id,
    "entry": DeploymentEntry.objects.get().blob_id,
    "debt": sorted(SweepDebt.objects.values_list("blob_id", flat=True)),
}
receipt = services.restore_point("rp_0033", by="t")
facts["restored"] = Artifact.objects.get(name="home").blob_id
facts["restore_kind"] = receipt.kind
with connection.cursor() as cursor:
    if connection.vendor == "postgresql":
        cursor.execute("SELECT DISTINCT data_type FROM information_schema.columns WHERE "
                       "(table_name, column_name) IN (('versions_blob', 'sha256'), "
                       "('versions_blob', 'base_id'), ('versions_artifact', 'blob_id'), "
                       "('versions_restorepoint', 'previous_blob_id'), "
                       "('versions_deploymententry', 'blob_id'), ('versions_sweepdebt', 'blob_id'))")
        facts["key_types"] = sorted(r[0] for r in cursor.fetchall())
    facts["indexes"] = sorted(connection.introspection.get_constraints(cursor, "versions_blob"))
open(OUT, "w").write(json.dumps(facts))
"""

# Back at 0032: the keys as text again, read without the models.
TEXT_KEYS = """
import json
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute("SELECT sha256, base_id FROM versions_blob ORDER BY sha256")
    blobs = cursor.fetchall()
    cursor.execute("SELECT blob_id FROM versions_artifact UNION ALL SELECT previous_blob_id "
                   "FROM versions_restorepoint UNION ALL SELECT blob_id FROM versions_sweepdebt")
    refs = sorted(r[0] for r in cursor.fetchall())
open(OUT, "w").write(json.dumps({"blobs": blobs, "refs": refs}))
"""


def _shell(database_url: str, code: str, out: Path) -> dict[str, Any]:
    manage(database_url, "shell", "-c", f"OUT = {str(out)!r}\n" + code)
    return json.loads(out.read_text())


def _upgrade_and_back(database_url: str, tmp_path: Path) -> tuple[dict, dict]:
    manage(database_url, "migrate", "-v0")
    manage(database_url, "migrate", "versions", "0032_safe_promotion", "-v0")
    manage(database_url, "shell", "-c", FILL)
    before = _shell(database_url, TEXT_KEYS, tmp_path / "before.json")
    manage(database_url, "migrate", "-v0")
    after = _shell(database_url, FACTS, tmp_path / "after.json")
    manage(database_url, "migrate", "versions", "0032_safe_promotion", "-v0")
    back = _shell(database_url, TEXT_KEYS, tmp_path / "back.json")
    after["back"] = back
    return after, before


def _check(facts: dict, before: dict) -> None:
    keys = sorted(k for k, _ in before["blobs"])
    bases = sorted(b for _, b in before["blobs"] if b)
    assert facts["intact"] and facts["read_back"], "every blob reads back to its key"
    assert facts["keys"] == keys and facts["bases"] == bases and len(bases) == 1
    assert facts["point"] == bases[0], "the point holds the delta's base, the older version"
    assert facts["entry"] == bases[0]
    assert facts["artifact"] in keys and facts["artifact"] != bases[0]
    assert sorted(facts["debt"])[0] == "" and sorted(facts["debt"])[1] in keys
    assert facts["restore_kind"] == "restore" and facts["restored"] == bases[0]
    # Going back gives the text keys again (the restore added a counter-point's).
    assert facts["back"]["blobs"] == before["blobs"]
    assert set(facts["back"]["refs"]) <= {"", *keys}
    assert len(facts["back"]["refs"]) == len(before["refs"]) + 1


def test_sqlite_database_at_0032_upgrades_with_every_key_and_byte(tmp_path):
    facts, before = _upgrade_and_back(f"sqlite:///{tmp_path / 'db.sqlite3'}", tmp_path)
    _check(facts, before)
    assert "blob_meta" in facts["indexes"], "SQLite's restore reads blob_meta"


def test_postgresql_database_at_0032_upgrades_to_byte_keys_with_every_byte(tmp_path):
    import psycopg

    server = os.environ.get(
        "VERSIONS_TEST_PG_SERVER", "postgres://postgres@127.0.0.1:5432/postgres"
    )
    try:
        with psycopg.connect(server, connect_timeout=3):
            pass
    except psycopg.OperationalError:
        pytest.skip("PostgreSQL is unreachable (set VERSIONS_TEST_PG_SERVER)")
    name = f"versions_upgrade_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        facts, before = _upgrade_and_back(server.rsplit("/", 1)[0] + f"/{name}", tmp_path)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _check(facts, before)
    assert facts["key_types"] == ["bytea"]
    assert "blob_meta" not in facts["indexes"]
