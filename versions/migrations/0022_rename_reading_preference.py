# A person's comparison layout is a reading preference: "review" now means a review of a change
# set (approve, request changes, comment), so the model and its names say what they are.

from django.conf import settings
from django.db import migrations, models
from django.db.models import Q


class Migration(migrations.Migration):

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ('versions', '0021_seams_closed_sets'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='reviewpreference',
            name='reviewpreference_known_layout',
        ),
        migrations.RenameModel(old_name='ReviewPreference', new_name='ReadingPreference'),
        migrations.AlterField(
            model_name='readingpreference',
            name='user',
            field=models.OneToOneField(
                on_delete=models.deletion.CASCADE,
                related_name='reading_preference',
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddConstraint(
            model_name='readingpreference',
            constraint=models.CheckConstraint(
                condition=Q(layout__in=['unified', 'split']),
                name='readingpreference_known_layout',
            ),
        ),
    ]
