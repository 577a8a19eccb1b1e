"""Re-pack the blobs already stored as deltas (docs/architecture.md#storage), in place: each
artifact's history, oldest first, becomes deltas against a full copy at least every 16 versions.

Not atomic: it commits every batch of artifacts, so an interrupted migration keeps what it did
and running it again goes on from there (a blob already a delta is skipped). Reversing it is a
no-op: deltas read back the same bytes under any later code.
"""

from django.db import migrations


def repack(apps, schema_editor):
    from versions import services

    models = tuple(
        apps.get_model("versions", name) for name in ("Artifact", "Blob", "RestorePoint")
    )
    services.repack_blobs(models=models)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("versions", "0010_delta_blob_storage")]

    operations = [migrations.RunPython(repack, migrations.RunPython.noop, elidable=True)]
