"""PostgreSQL: a smaller blob table (docs/performance.md, "Where the blob table's size goes").

- The ``blob_meta`` index (sha256, size, chars) goes on PostgreSQL. It covers a restore's size
  and length lookups so that SQLite need not walk a row's overflow pages (the bytes) to reach
  them; PostgreSQL keeps a large source out of the row (TOAST), so the primary key and the row
  serve those lookups, and the index only doubled the table's key bytes. SQLite keeps it (its
  restore reads it with ``INDEXED BY blob_meta``); the model still declares it for SQLite.
"""

from django.db import migrations

META_COLUMNS = "(sha256, size, chars)"


def drop_meta(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute('DROP INDEX IF EXISTS "blob_meta"')


def create_meta(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f'CREATE INDEX IF NOT EXISTS "blob_meta" ON "versions_blob" {META_COLUMNS}'
        )


class Migration(migrations.Migration):
    dependencies = [("versions", "0032_safe_promotion")]

    operations = [migrations.RunPython(drop_meta, create_meta, elidable=False)]
