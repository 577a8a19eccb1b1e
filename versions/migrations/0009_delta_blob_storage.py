"""Delta storage (SPEC §18): a blob may be a zstd delta against a full copy of an earlier version
of its artifact (``base``; ``chain`` counts the versions since that full copy, at most 15).
Existing blobs stay full copies; 0010 re-packs them."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("versions", "0008_no_pattern_indexes_on_postgresql"),
    ]

    operations = [
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
        migrations.AlterField(
            model_name="blob",
            name="data",
            field=models.BinaryField(
                help_text="UTF-8 bytes, zlib-compressed when `compressed`; a zstd delta when `base`."
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
    ]
