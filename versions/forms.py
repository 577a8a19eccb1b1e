"""Django forms of the panel: they read and check what a person typed; the services decide and
write (docs/architecture.md#layers)."""

from __future__ import annotations

from django import forms

from versions.models import AppProtection, Review


class ProtectionForm(forms.Form):
    """An app's protection on its Settings page (docs/architecture.md#protection)."""

    required_approvals = forms.IntegerField(
        label="Required approvals",
        min_value=0,
        max_value=AppProtection.MAX_APPROVALS,
        help_text="Approvals each change set needs, from people other than its authors, before "
        "it may go to production (0 to 5; 0: no review is required).",
    )
    block_on_changes_requested = forms.BooleanField(
        label="Requested changes block promotion",
        required=False,
        help_text="With approvals required, a set with an open change request stays out of "
        "production.",
    )
    dismiss_stale = forms.BooleanField(
        label="Dismiss stale approvals",
        required=False,
        help_text="With approvals required, approvals given before later writes joined a set no "
        "longer count.",
    )


class ReviewForm(forms.Form):
    """The Review box of a change set's page."""

    verdict = forms.ChoiceField(
        label="Verdict", choices=Review.VERDICT_CHOICES, widget=forms.RadioSelect
    )
    body = forms.CharField(
        label="Review", required=False, widget=forms.Textarea(attrs={"rows": 4}), strip=False
    )
