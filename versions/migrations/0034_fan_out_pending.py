"""One fan-out task per app while one waits (docs/architecture.md#notifications).

- ``FanOutPending``: a row per app whose fan-out task is queued and not started yet. A write
  that stores an event queues the app's task only when it makes this row.
- The index of the events not fanned out yet becomes partial (``WHERE NOT fanned_out``) and
  keyed by app: the app's task reads its app's waiting events, oldest first; the rescue of
  late ones reads them all. It holds the few events waiting, not every event ever stored.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('versions', '0033_blob_storage'),
    ]

    operations = [
        migrations.CreateModel(
            name='FanOutPending',
            fields=[
                ('app', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to='versions.app')),
                ('since', models.DateTimeField(help_text='When its task was queued: a mark older than a minute is renewed with a new task (its task was lost).')),
            ],
        ),
        migrations.RemoveIndex(
            model_name='webhookevent',
            name='webhook_event_pending',
        ),
        migrations.AddIndex(
            model_name='webhookevent',
            index=models.Index(condition=models.Q(('fanned_out', False)), fields=['app', 'created_on'], name='webhook_event_waiting'),
        ),
    ]
