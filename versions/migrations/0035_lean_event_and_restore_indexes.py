"""Two indexes fitted to what reads them (docs/performance.md#lean-indexes).

- ``webhook_event_app`` goes: nothing reads an app's events but its fan-out, which reads the
  waiting ones on ``webhook_event_waiting``; every stored event paid for one more B-tree.
- ``changeset_unnamed_restores``: an app's unnamed restore sets, newest last, which retention
  reads to keep the counter-points of the newest N, without reading past the app's change
  sets and named restore sets.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('versions', '0034_fan_out_pending'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='webhookevent',
            name='webhook_event_app',
        ),
        migrations.AddIndex(
            model_name='changeset',
            index=models.Index(condition=models.Q(('kind', 'restore'), ('name', '')), fields=['app', 'created_on', 'id'], name='changeset_unnamed_restores'),
        ),
    ]
