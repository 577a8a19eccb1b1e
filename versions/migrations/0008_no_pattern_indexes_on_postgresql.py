"""PostgreSQL: drop the ``varchar_pattern_ops`` ("_like") indexes Django adds beside the index of
every indexed varchar column, on the tables a capture writes.

They serve only ``LIKE 'prefix%'`` queries, which Versions never runs on these ids and hashes
(the admin's searches are ``icontains``, which cannot use them), and each one is one more index
entry for every row a capture inserts or re-points: six per capture. Other databases have none.
"""

from django.db import migrations

# (model, field) pairs whose pattern index goes.
FIELDS = [
    ("artifact", "blob"),
    ("blob", "sha256"),
    ("changeset", "id"),
    ("restorepoint", "id"),
    ("restorepoint", "change_set"),
    ("restorepoint", "previous_blob"),
]


def _like_index_names(schema_editor, model, field):
    return [
        name
        for name, info in schema_editor.connection.introspection.get_constraints(
            schema_editor.connection.cursor(), model._meta.db_table
        ).items()
        if info["index"] and info["columns"] == [field.column] and name.endswith("_like")
    ]


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for model_name, field_name in FIELDS:
        model = apps.get_model("versions", model_name)
        field = model._meta.get_field(field_name)
        for name in _like_index_names(schema_editor, model, field):
            schema_editor.execute(
                schema_editor.sql_delete_index
                % {"table": "", "name": schema_editor.quote_name(name)}
            )


def restore(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for model_name, field_name in FIELDS:
        model = apps.get_model("versions", model_name)
        field = model._meta.get_field(field_name)
        if not _like_index_names(schema_editor, model, field):
            sql = schema_editor._create_like_index_sql(model, field)
            if sql is not None:
                schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("versions", "0007_fewer_index_writes")]

    operations = [migrations.RunPython(drop, restore, elidable=False)]
