"""The audit trail: one append-only, hash-chained AuditEvent (id ae_…) for every action.

The audit log it replaces (kind, by, change_set_ref, data) is carried over, oldest first, as
the chain's first events: kind → action, by → actor (a user when a user of that name exists,
else a command), change_set_ref → targets, data → details.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from versions.audit_chain import GENESIS, event_document, event_hash, event_id
from versions.ids import datetime_to_ms


def carry_over(apps, schema_editor):
    Legacy = apps.get_model("versions", "LegacyAuditEvent")
    AuditEvent = apps.get_model("versions", "AuditEvent")
    Head = apps.get_model("versions", "AuditChainHead")
    App = apps.get_model("versions", "App")
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    slugs = dict(App.objects.values_list("pk", "slug"))
    prev, seq = GENESIS, 0
    for old in Legacy.objects.order_by("on", "id").iterator():
        seq += 1
        user_id = (
            User.objects.filter(username=old.by).values_list("pk", flat=True).first()
            if old.by
            else None
        )
        event = AuditEvent(
            id=event_id(datetime_to_ms(old.on)),
            seq=seq,
            app_id=old.app_id,
            actor_kind="user" if user_id is not None else "command",
            actor_name=old.by,
            actor_user_id=user_id,
            action=old.kind,
            targets=[old.change_set_ref] if old.change_set_ref else [],
            reason="",
            details=old.data or {},
            address="",
            user_agent="",
            created_on=old.on,
            prev_hash=prev,
        )
        document = event_document(
            id=event.id,
            seq=seq,
            app=slugs.get(old.app_id),
            actor_kind=event.actor_kind,
            actor_name=event.actor_name,
            action=event.action,
            targets=event.targets,
            reason="",
            details=event.details,
            address="",
            user_agent="",
            created_on=event.created_on,
        )
        event.hash = event_hash(prev, document)
        event.save(force_insert=True)
        prev = event.hash
    Head.objects.update_or_create(pk=1, defaults={"seq": seq, "hash": prev})


class Migration(migrations.Migration):
    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("versions", "0023_harden_artifact_skeleton"),
    ]

    operations = [
        migrations.RenameModel("AuditEvent", "LegacyAuditEvent"),
        migrations.AlterField(
            model_name="legacyauditevent",
            name="app",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="versions.app",
            ),
        ),
        migrations.CreateModel(
            name="AuditChainHead",
            fields=[
                (
                    "id",
                    models.PositiveSmallIntegerField(default=1, primary_key=True, serialize=False),
                ),
                (
                    "seq",
                    models.BigIntegerField(
                        default=0, help_text="The latest event's number (0: none)."
                    ),
                ),
                (
                    "hash",
                    models.CharField(
                        default=GENESIS, help_text="The latest event's hash.", max_length=64
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="AuditEvent",
            fields=[
                (
                    "id",
                    models.CharField(
                        help_text="ae_<ms base36>_<8 chars>.",
                        max_length=40,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                (
                    "seq",
                    models.BigIntegerField(help_text="Position in the chain, from 1.", unique=True),
                ),
                (
                    "actor_kind",
                    models.CharField(
                        choices=[
                            ("user", "User"),
                            ("token", "Agent token"),
                            ("command", "Command"),
                        ],
                        max_length=10,
                    ),
                ),
                (
                    "actor_name",
                    models.CharField(
                        blank=True,
                        help_text="The username, the token (prefix… of user) or the command.",
                        max_length=200,
                    ),
                ),
                (
                    "action",
                    models.CharField(
                        help_text="What happened: signed_in, member_added, …", max_length=40
                    ),
                ),
                (
                    "targets",
                    models.JSONField(
                        blank=True, default=list, help_text="Ids of what it acted on."
                    ),
                ),
                (
                    "reason",
                    models.TextField(blank=True, help_text="Why, in the actor's words (if given)."),
                ),
                (
                    "details",
                    models.JSONField(
                        blank=True, default=dict, help_text="What changed (role, name…)."
                    ),
                ),
                (
                    "address",
                    models.CharField(
                        blank=True, help_text="The client's IP address.", max_length=45
                    ),
                ),
                ("user_agent", models.CharField(blank=True, max_length=300)),
                ("created_on", models.DateTimeField()),
                (
                    "prev_hash",
                    models.CharField(help_text="The hash of the event before.", max_length=64),
                ),
                ("hash", models.CharField(max_length=64)),
                (
                    "app",
                    models.ForeignKey(
                        blank=True,
                        db_index=False,
                        help_text="The app acted on; empty for the instance (sign-in, tokens of several apps).",
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="audit_events",
                        to="versions.app",
                    ),
                ),
                (
                    "actor_token",
                    models.ForeignKey(
                        blank=True,
                        db_index=False,
                        help_text="The agent token that acted; empty once deleted.",
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="versions.agenttoken",
                    ),
                ),
                (
                    "actor_user",
                    models.ForeignKey(
                        blank=True,
                        db_index=False,
                        help_text="The person (a token's user); empty once deleted.",
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-seq"],
                "indexes": [
                    models.Index(fields=["app", "-seq"], name="auditevent_app_recent"),
                    models.Index(fields=["created_on"], name="auditevent_created"),
                ],
            },
        ),
        migrations.RunPython(carry_over, migrations.RunPython.noop),
        migrations.DeleteModel("LegacyAuditEvent"),
    ]
