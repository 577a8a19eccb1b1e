"""PostgreSQL: a smaller blob table (docs/performance.md, "Where the blob table's size goes").

- Blob keys are stored as their 32 bytes (``bytea``), not as 64 characters of hex text: the
  blob's own key and its base's, every key that points at a blob (an artifact's, a point's, a
  deployment entry's) and the sweep debt's. Python still sees the hex text
  (``BlobKeyField``). Existing keys are converted (``decode(key, 'hex')``), nothing else.
- The blob table is rebuilt with its fixed-width columns first and its sizes as 4-byte
  integers (a source is at most ``VERSIONS_MAX_WRITE_BYTES``), so a row carries no alignment
  padding; its primary key is built once over the copied rows.
- The ``blob_meta`` index (sha256, size, chars) goes. It covers a restore's size and length
  lookups so that SQLite need not walk a row's overflow pages (the bytes) to reach them;
  PostgreSQL keeps a large source out of the row (TOAST), so the primary key and the row serve
  those lookups. SQLite keeps it (its restore reads it with ``INDEXED BY blob_meta``).

SQLite's tables do not change: the keys stay text there, and an integer column is the same
whatever its declared width. Going back converts the keys to text again.
"""

import django.db.models.deletion
from django.db import migrations, models

import versions.models

BLOB = "versions_blob"
# Every column that holds a blob key outside the blob table (the sweep debt's is no foreign key).
KEYS = [
    ("versions_artifact", "blob_id"),
    ("versions_restorepoint", "previous_blob_id"),
    ("versions_deploymententry", "blob_id"),
    ("versions_sweepdebt", "blob_id"),
]
# The blob table as rebuilt: fixed-width columns first, widest first, then the keys and the
# bytes (variable width, no alignment).
REBUILT = [
    ("created_on", "timestamp with time zone NOT NULL"),
    ("size", f"integer NOT NULL CONSTRAINT {BLOB}_size_check CHECK (size >= 0)"),
    ("chars", f"integer NOT NULL CONSTRAINT {BLOB}_chars_check CHECK (chars >= 0)"),
    ("chain", f"smallint NOT NULL CONSTRAINT {BLOB}_chain_check CHECK (chain >= 0)"),
    ("compressed", "boolean NOT NULL"),
    ("sha256", "bytea NOT NULL"),
    ("base_id", "bytea NULL"),
    ("data", "bytea NOT NULL"),
]


def _rows(cursor, sql, params=()):
    cursor.execute(sql, params)
    return cursor.fetchall()


def _foreign_keys(cursor):
    """(table, name, definition) of every foreign key to the blob table."""
    return _rows(
        cursor,
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE contype = 'f' AND confrelid = %s::regclass ORDER BY conname",
        [BLOB],
    )


def _retype(cursor, convert):
    """Drop the foreign keys to the blob table, run ``convert`` (which retypes the keys), and
    add the foreign keys back as they were (they check every row again)."""
    keys = _foreign_keys(cursor)
    for table, name, _ in keys:
        cursor.execute(f'ALTER TABLE "{table}" DROP CONSTRAINT "{name}"')
    # Pattern-operator indexes (LIKE) exist on text keys only; none is used on them.
    for table, column in KEYS:
        for (index,) in _rows(
            cursor,
            "SELECT i.indexrelid::regclass::text FROM pg_index AS i JOIN pg_attribute AS a "
            "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            "WHERE i.indrelid = %s::regclass AND a.attname = %s "
            "AND pg_get_indexdef(i.indexrelid) LIKE '%%pattern_ops%%'",
            [table, column],
        ):
            cursor.execute(f'DROP INDEX "{index}"')
    convert()
    for table, name, definition in keys:
        cursor.execute(f'ALTER TABLE "{table}" ADD CONSTRAINT "{name}" {definition}')


def to_bytes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:

        def convert():
            indexes = _rows(
                cursor,
                "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = %s::regclass "
                "AND NOT indisprimary AND indexrelid::regclass::text <> 'blob_meta'",
                [BLOB],
            )
            checks = _rows(
                cursor,
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = %s::regclass AND contype = 'c' AND conname <> ALL(%s)",
                [BLOB, [f"{BLOB}_{name}_check" for name in ("size", "chars", "chain")]],
            )
            (options, compression) = _rows(
                cursor,
                "SELECT c.reloptions, a.attcompression FROM pg_class AS c JOIN pg_attribute "
                "AS a ON a.attrelid = c.oid AND a.attname = 'data' WHERE c.oid = %s::regclass",
                [BLOB],
            )[0]
            columns = ", ".join(f"{name} {kind}" for name, kind in REBUILT)
            storage = f" WITH ({', '.join(options)})" if options else ""
            cursor.execute(f"CREATE TABLE {BLOB}_rebuilt ({columns}){storage}")
            if compression == "l":
                cursor.execute(f"ALTER TABLE {BLOB}_rebuilt ALTER COLUMN data SET COMPRESSION lz4")
            names = ", ".join(name for name, _ in REBUILT)
            read = ", ".join(
                f"decode({name}, 'hex')" if name in ("sha256", "base_id") else name
                for name, _ in REBUILT
            )
            cursor.execute(
                f"INSERT INTO {BLOB}_rebuilt ({names}) SELECT {read} FROM {BLOB} "  # noqa: S608
                "ORDER BY created_on"
            )
            cursor.execute(f"DROP TABLE {BLOB}")
            cursor.execute(f"ALTER TABLE {BLOB}_rebuilt RENAME TO {BLOB}")
            cursor.execute(f"ALTER TABLE {BLOB} ADD CONSTRAINT {BLOB}_pkey PRIMARY KEY (sha256)")
            for (definition,) in indexes:
                cursor.execute(definition)
            for name, definition in checks:
                cursor.execute(f'ALTER TABLE {BLOB} ADD CONSTRAINT "{name}" {definition}')
            for table, column in KEYS:
                cursor.execute(
                    f'ALTER TABLE "{table}" ALTER COLUMN "{column}" TYPE bytea '
                    f"USING decode(\"{column}\", 'hex')"
                )

        _retype(cursor, convert)
        cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {BLOB})")  # noqa: S608
        if cursor.fetchone()[0]:  # the copied rows' statistics (a new table has none)
            cursor.execute(f"ANALYZE {BLOB}")


def to_text(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:

        def convert():
            cursor.execute(
                f"ALTER TABLE {BLOB} "
                "ALTER COLUMN sha256 TYPE varchar(64) USING encode(sha256, 'hex'), "
                "ALTER COLUMN base_id TYPE varchar(64) USING encode(base_id, 'hex'), "
                "ALTER COLUMN size TYPE bigint, ALTER COLUMN chars TYPE bigint"
            )
            cursor.execute(f"CREATE INDEX blob_meta ON {BLOB} (sha256, size, chars)")
            for table, column in KEYS:
                cursor.execute(
                    f'ALTER TABLE "{table}" ALTER COLUMN "{column}" TYPE varchar(64) '
                    f"USING encode(\"{column}\", 'hex')"
                )

        _retype(cursor, convert)


class Migration(migrations.Migration):
    dependencies = [("versions", "0032_safe_promotion")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(to_bytes, to_text, elidable=False)],
            state_operations=[
                migrations.AlterField(
                    model_name="blob",
                    name="sha256",
                    field=versions.models.BlobKeyField(
                        help_text="Hex sha256 of the UTF-8 bytes.",
                        max_length=64,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                migrations.AlterField(
                    model_name="blob",
                    name="size",
                    field=models.PositiveIntegerField(help_text="Length of the UTF-8 bytes."),
                ),
                migrations.AlterField(
                    model_name="blob",
                    name="chars",
                    field=models.PositiveIntegerField(
                        help_text="Length of the text in characters."
                    ),
                ),
                # Keys to a blob read back as hex text in subqueries and aggregates too.
                migrations.AlterField(
                    model_name="artifact",
                    name="blob",
                    field=versions.models.BlobForeignKey(
                        blank=True,
                        help_text="The current source; empty for a tombstone.",
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="versions.blob",
                    ),
                ),
                migrations.AlterField(
                    model_name="blob",
                    name="base",
                    field=versions.models.BlobForeignKey(
                        blank=True,
                        db_index=False,
                        help_text="The full copy whose bytes are this blob's zstd dictionary; "
                        "null for a full copy. A blob another delta needs is never swept.",
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="versions.blob",
                    ),
                ),
                migrations.AlterField(
                    model_name="deploymententry",
                    name="blob",
                    field=versions.models.BlobForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="versions.blob",
                    ),
                ),
                migrations.AlterField(
                    model_name="restorepoint",
                    name="previous_blob",
                    field=versions.models.BlobForeignKey(
                        blank=True,
                        help_text="The replaced source; empty when not stored or when nothing "
                        "existed.",
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="versions.blob",
                    ),
                ),
                migrations.AlterField(
                    model_name="sweepdebt",
                    name="blob_id",
                    field=versions.models.BlobKeyField(
                        blank=True,
                        help_text='The sha256 of the blob owed ("": none).',
                        max_length=64,
                    ),
                ),
            ],
        )
    ]
