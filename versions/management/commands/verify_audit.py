"""``verify_audit``: walk the audit trail's hash chain; exit 1 naming the first event altered,
inserted or missing."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from versions import selectors


class Command(BaseCommand):
    help = (
        "Check the audit trail: recompute every event's hash from the one before it and name "
        "the first event altered, inserted or missing (exit status 1)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        check = selectors.verify_audit_chain()
        if not check.intact:
            raise CommandError(
                f"The audit chain is broken after {check.count} intact events. {check.problem}",
                returncode=1,
            )
        self.stdout.write(selectors.INTACT.format(count=check.count))
        if check.loaded_apps:
            self.stdout.write(
                selectors.LOADED_INTACT.format(count=check.loaded, apps=check.loaded_apps)
            )
