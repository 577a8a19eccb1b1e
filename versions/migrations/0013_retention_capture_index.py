"""Retention counts capture points and counter-points apart (docs/architecture.md#retention): its
index leads with the app and the kind. Restore sets that retention emptied before they were removed
with their points go now, as they do from now on: a set with no points is never listed as
restorable."""

from django.db import migrations, models


def remove_emptied_sets(apps, schema_editor):
    ChangeSet = apps.get_model("versions", "ChangeSet")
    # Sets with no point left; only those retention emptied (it lists what it pruned).
    emptied = ChangeSet.objects.filter(points__isnull=True).values_list("id", "pruned")
    doomed = [set_id for set_id, pruned in emptied.iterator() if pruned]
    for start in range(0, len(doomed), 500):
        # on_delete=SET_NULL clears later sets' restored_from, release marks and the app's mark.
        ChangeSet.objects.filter(id__in=doomed[start : start + 500]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("versions", "0012_harden_token_expiry"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="restorepoint", name="point_app_retention"),
        migrations.AddIndex(
            model_name="restorepoint",
            index=models.Index(
                fields=["app", "kind", "pinned", "created_on"], name="point_app_retention"
            ),
        ),
        migrations.RunPython(remove_emptied_sets, migrations.RunPython.noop),
    ]
