"""One way from request parameters to a report, shared by the page, the API, the CSV export and the
command, so they cannot disagree: the period (kind, a date in it, the time zone), the grouping, the
FilterSet's filters and the user's scope."""

from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from mirror import roles

from .filtersets import UsageReportFilterSet
from .periods import KINDS, parse_period, report_zone
from .reports import GROUPS, build_report

MAX_TREND = 12
MAX_LIMIT = 10000
PARAMS = ("period", "date", "tz", "group_by", "trend", "limit")


class ReportForm(forms.Form):
    period = forms.ChoiceField(choices=[(k, k) for k in KINDS], required=False, label=_("Period"))
    date = forms.CharField(required=False, max_length=10, label=_("Date in the period"))
    tz = forms.CharField(required=False, max_length=64, label=_("Time zone"))
    group_by = forms.ChoiceField(choices=[(g, g) for g in GROUPS], required=False, label=_("Group by"))
    trend = forms.IntegerField(required=False, min_value=0, max_value=MAX_TREND, label=_("Previous periods"))
    limit = forms.IntegerField(required=False, min_value=1, max_value=MAX_LIMIT, label=_("Rows"))


def report_for(params, user=None, now=None):
    """(report, limit) for query parameters; ValidationError({field: [message]}) for bad ones.

    `user` None: the command (every namespace, cluster totals)."""
    now = now or timezone.now()
    form = ReportForm(params)
    filters = UsageReportFilterSet(params, queryset=UsageReportFilterSet._meta.model.objects.none())
    errors = {}
    if not form.is_valid():
        errors.update({k: [str(m) for m in v] for k, v in form.errors.items()})
    if not filters.is_valid():
        errors.update({k: [str(m) for m in v] for k, v in filters.form.errors.items()})
    if errors:
        raise ValidationError(errors)
    data = form.cleaned_data
    try:
        zone = report_zone(data.get("tz") or None)
    except ValueError as exc:
        raise ValidationError({"tz": [str(exc)]}) from exc
    try:
        period = parse_period(data.get("period") or "month", data.get("date"), zone, now)
    except ValueError as exc:
        raise ValidationError({"date": [str(exc)]}) from exc
    namespaces = None if user is None else roles.visible_namespaces(user)
    admin_view = user is None or roles.role_of(user) == roles.ADMIN
    report = build_report(
        period,
        data.get("group_by") or "namespace",
        filters.report_filters(),
        trend=3 if data.get("trend") is None else data["trend"],
        namespaces=namespaces,
        admin_view=admin_view,
        now=now,
    )
    return report, data.get("limit")
