"""The usage page (/usage/): a period's GPU-hours by namespace, team, workload, model or node pool, with
the trend chart, top consumers, used and idle GPU-hours, and the CSV export of the same report."""

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest, PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from mirror import roles
from mirror.views import DashboardView

from .api import csv_response
from .filtersets import UsageReportFilterSet
from .periods import KINDS
from .query import PARAMS, report_for
from .reports import GROUPS, currency

GROUP_LABELS = {
    "namespace": _("Namespace"),
    "team": _("Team"),
    "workload": _("Workload"),
    "model": _("Model"),
    "node_pool": _("Node pool"),
    "cluster": _("Cluster"),
}
COLUMN_LABELS = {**GROUP_LABELS, "workload_kind": _("Kind"), "workload_name": _("Workload")}
PERIOD_LABELS = {"day": _("Day"), "week": _("Week"), "month": _("Month")}
RULE_LABELS = {
    "whole": _("whole devices"),
    "partition": _("partitions"),
    "capacity": _("capacity shares"),
    "admin": _("admin access"),
}


def _params(request, cluster=None):
    """The report's parameters from the query string; the page's cluster picker stands in for `cluster`."""
    known = set(PARAMS) | set(UsageReportFilterSet.base_filters)
    params = {k: v for k, v in request.GET.items() if k in known and v != ""}
    if "cluster" not in params and cluster is not None:
        params["cluster"] = cluster.name
    if params.get("cluster") == "all":
        params.pop("cluster")
    return params


def _failed(exc):
    return BadRequest("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items()))


class UsageReportPage(DashboardView):
    template_name = "usage/report.html"
    nav = "usage"

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        params = _params(self.request, self.cluster)
        try:
            report, limit = report_for(params, self.request.user)
        except DjangoValidationError as exc:
            raise _failed(exc) from exc
        query = urlencode(params)
        columns = list(GROUPS[report.group_by])
        top = max((r.gpu_hours for r in report.rows), default=0.0) or 1.0
        rows = [
            {
                "row": r,
                "values": [r.key[c] for c in columns],
                "bar": round(100 * r.gpu_hours / top, 1),
                "rules": [(RULE_LABELS.get(rule, rule), h) for rule, h in sorted(r.by_rule.items())],
                "trend_prev": r.trend[0] if r.trend else None,
            }
            for r in report.rows[:limit]
        ]
        here = {k: v for k, v in params.items() if k not in ("date",)}
        # The trend chart: the previous periods and this one, oldest first; the total and the top five.
        past = list(reversed(report.trend))
        chart = {
            "labels": [p.label for p, _h in past] + [report.period.label],
            "timestamps": [int(p.start.timestamp()) for p, _h in past] + [int(report.period.start.timestamp())],
            "series": [{"name": str(_("Total")), "values": [round(h, 3) for _p, h in past] + [round(report.total, 3)]}]
            + [
                {
                    "name": "/".join(str(r.key[c]) for c in columns) or str(_("(none)")),
                    "values": [round(h, 3) for h in reversed(r.trend)] + [round(r.gpu_hours, 3)],
                }
                for r in report.rows[:5]
            ],
        }
        ctx.update(
            report=report,
            chart=chart,
            rows=rows,
            admin_rows=[{"row": r, "values": [r.key[c] for c in columns]} for r in report.admin],
            columns=[COLUMN_LABELS.get(c, c) for c in columns],
            group_options=[(g, GROUP_LABELS[g], g == report.group_by) for g in GROUPS],
            period_options=[(k, PERIOD_LABELS[k], k == report.period.kind) for k in KINDS],
            period_label=report.period.label,
            previous_url="?" + urlencode({**here, "date": report.period.previous().first_day.isoformat()}),
            next_url="?" + urlencode({**here, "date": report.period.end_day.isoformat()}),
            params=params,
            csv_url=reverse("usage:report-csv") + ("?" + query if query else ""),
            api_url=reverse("api:usage") + ("?" + query if query else ""),
            currency=currency(),
            is_admin=roles.role_of(self.request.user) == roles.ADMIN,
            rule_labels=RULE_LABELS,
            total_rules=[(RULE_LABELS.get(rule, rule), h) for rule, h in sorted(report.totals_by_rule().items())],
        )
        return ctx


@login_required
def usage_csv(request):
    """The page's report as CSV (the session's login; the API's /api/v1/usage/csv for tokens)."""
    if not roles.has_role(request.user, roles.VIEWER):
        raise PermissionDenied("The viewer role is needed.")
    try:
        report, limit = report_for(_params(request), request.user)
    except DjangoValidationError as exc:
        raise _failed(exc) from exc
    return csv_response(report, limit)
