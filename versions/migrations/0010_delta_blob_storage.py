"""Delta storage (docs/architecture.md#storage): a blob may be a zstd delta against a full copy of
an earlier version of its artifact (``base``; ``chain`` counts the versions since that full copy, at
most 15). Existing blobs stay full copies; 0010 re-packs them.

On PostgreSQL a row stays in the table's own pages up to 8 KB (``toast_tuple_target``): full
copies are zstd-compressed by then, so moving them out to TOAST would only add a second read and
the TOAST table's own pages; larger ones still go there (with lz4, 0005)."""

import django.db.models.deletion
from django.db import migrations, models


def keep_rows_inline(apps, schema_editor):
    _toast_target(apps, schema_editor, "8160")


def default_toast(apps, schema_editor):
    _toast_target(apps, schema_editor, None)


def _toast_target(apps, schema_editor, value):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    table = connection.ops.quote_name(apps.get_model("versions", "Blob")._meta.db_table)
    with connection.cursor() as cursor:
        if value is None:
            cursor.execute(f"ALTER TABLE {table} RESET (toast_tuple_target)")
        else:
            cursor.execute(f"ALTER TABLE {table} SET (toast_tuple_target = {value})")


class Migration(migrations.Migration):
    dependencies = [
        ("versions", "0009_appmembership"),
    ]

    operations = [
        migrations.AlterField(
            model_name="blob",
            name="data",
            field=models.BinaryField(
                help_text=(
                    "UTF-8 bytes, compressed (zstd, or zlib) when `compressed`; a zstd delta "
                    "when `base`."
                )
            ),
        ),
        migrations.AlterModelOptions(
            name="blob",
            options={"base_manager_name": "objects", "ordering": ["created_on"]},
        ),
        migrations.AddField(
            model_name="blob",
            name="base",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                help_text="The full copy whose bytes are this blob's zstd dictionary; null for a full copy. A blob another delta needs is never swept.",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="versions.blob",
            ),
        ),
        migrations.AddField(
            model_name="blob",
            name="chain",
            field=models.PositiveSmallIntegerField(
                default=0,
                help_text="0 for a full copy; n for the n-th version stored as a delta against its base (at most 15: a full copy at least every 16 versions).",
            ),
        ),
        migrations.AddIndex(
            model_name="blob",
            index=models.Index(fields=["base"], name="blob_base"),
        ),
        migrations.AddConstraint(
            model_name="blob",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("base__isnull", True), ("chain", 0)),
                    models.Q(
                        ("base__isnull", False),
                        ("chain__gte", 1),
                        ("chain__lte", 15),
                        ("compressed", False),
                    ),
                    _connector="OR",
                ),
                name="blob_delta_chain",
            ),
        ),
        migrations.RunPython(keep_rows_inline, default_toast, elidable=False),
    ]
