"""GET /api/v1/usage (the report as JSON) and /api/v1/usage/csv (the same report, one line per group
and unit rule)."""

import csv
import io

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from mirror.api.filters import check_params
from mirror.api.permissions import IsViewer

from .filtersets import UsageReportFilterSet
from .periods import KINDS
from .query import MAX_LIMIT, MAX_TREND, PARAMS, report_for
from .reports import CSV_HEADER, GROUPS, csv_lines, report_json

PARAMETERS = [
    OpenApiParameter(
        "period", OpenApiTypes.STR, enum=list(KINDS), description="day, week (ISO, Monday first) or month (default)."
    ),
    OpenApiParameter(
        "date",
        OpenApiTypes.STR,
        description="A date in the period (YYYY-MM-DD; YYYY-MM for a month, YYYY-Www for a week); default: now.",
    ),
    OpenApiParameter(
        "tz", OpenApiTypes.STR, description="IANA time zone the period is aligned in (default USAGE_TIME_ZONE)."
    ),
    OpenApiParameter("group_by", OpenApiTypes.STR, enum=list(GROUPS), description="default namespace"),
    OpenApiParameter(
        "trend", OpenApiTypes.INT, description=f"Previous periods to compare with (default 3, at most {MAX_TREND})."
    ),
    OpenApiParameter(
        "limit", OpenApiTypes.INT, description=f"At most this many rows, top consumers first (at most {MAX_LIMIT})."
    ),
]
# The FilterSet's filters, documented from the FilterSet itself.
PARAMETERS += [
    OpenApiParameter(
        name,
        OpenApiTypes.STR,
        enum=[c[0] for c in f.extra["choices"]] if "choices" in f.extra else None,
        description=str(f.extra.get("help_text", "")),
    )
    for name, f in UsageReportFilterSet.base_filters.items()
]
Figures = serializers.DictField(child=serializers.FloatField(allow_null=True))
ReportSchema = inline_serializer(
    "UsageReport",
    {
        "period": serializers.DictField(help_text="kind, label, start, end (ISO), time_zone, hours."),
        "group_by": serializers.CharField(),
        "group_columns": serializers.ListField(child=serializers.CharField()),
        "currency": serializers.CharField(allow_null=True, help_text="null when no price is set (USAGE_PRICES)."),
        "total_gpu_hours": serializers.FloatField(help_text="Sum of the rows (the user's namespaces)."),
        "total_by_rule": Figures,
        "cluster_total_gpu_hours": serializers.FloatField(
            allow_null=True, help_text="Every namespace's GPU-hours (admins only, else null)."
        ),
        "cost": serializers.FloatField(allow_null=True),
        "utilization_known_gpu_hours": serializers.FloatField(),
        "idle_gpu_hours": serializers.FloatField(),
        "idle_cost": serializers.FloatField(allow_null=True),
        "admin_access_gpu_hours": serializers.FloatField(help_text="Device-hours watched with admin access, apart."),
        "count": serializers.IntegerField(),
        "results": serializers.ListField(
            child=serializers.DictField(),
            help_text="Per group: its columns, gpu_hours, by_rule (GPU-hours per unit rule: whole, partition, "
            "capacity), cost, utilization_known_gpu_hours, used_gpu_hours, idle_gpu_hours, idle_cost, trend "
            "(the previous periods' GPU-hours, newest first).",
        ),
        "admin_access": serializers.ListField(child=serializers.DictField()),
        "trend": serializers.ListField(child=serializers.DictField()),
        "ledger_gaps": serializers.ListField(
            child=serializers.DictField(),
            help_text="Spans the sync could not watch (cluster, start, end, reason), at most 50: the ledger has no "
            "time there, so figures may miss some.",
        ),
        "ledger_gap_hours": serializers.FloatField(help_text="Their total length inside the period."),
        "computed_at": serializers.DateTimeField(),
        "source": serializers.DictField(
            help_text="rollup_days read from the daily rollup, ledger_from: the ledger after."
        ),
    },
)


def _report(request):
    check_params(request, set(PARAMS) | set(UsageReportFilterSet.base_filters) | {"format"})
    try:
        return report_for(request.query_params, request.user)
    except DjangoValidationError as exc:
        raise ValidationError(exc.message_dict) from exc


class UsageReportView(APIView):
    permission_classes = [IsViewer]

    @extend_schema(
        summary="Usage report",
        description="GPU-hours (whole-GPU equivalents x hours, per unit rule) of a calendar-aligned period by "
        "namespace, team label, workload, model, node pool or cluster, top consumers first; used and idle "
        "GPU-hours where DCGM utilization was sampled; cost where USAGE_PRICES sets a price. Admin-access "
        "allocations are listed apart (device-hours watched). A user with a namespace scope sees only its "
        "namespaces; the cluster total only admins.",
        parameters=PARAMETERS,
        filters=False,
        responses=ReportSchema,
    )
    def get(self, request):
        report, limit = _report(request)
        return Response(report_json(report, limit))


def csv_response(report, limit=None):
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_HEADER)
    writer.writerows(csv_lines(report, limit))
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="gpu-usage-{report.period.label}-{report.group_by}.csv"'
    return response


class UsageCsvView(APIView):
    permission_classes = [IsViewer]

    @extend_schema(
        summary="Usage report as CSV",
        description="The report of GET /api/v1/usage, one line per group and unit rule (admin-access lines last).",
        parameters=PARAMETERS,
        filters=False,
        responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR)},
    )
    def get(self, request):
        report, limit = _report(request)
        return csv_response(report, limit)
