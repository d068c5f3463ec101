"""The usage report's filters, one FilterSet for the page, the API, the CSV and the command (it
validates the values; usage/reports.py applies them to the ledger or the rollup alike)."""

import django_filters

from mirror.api.filters import ApiFilterSet
from mirror.models import Cluster

from .models import UsageDay
from .reports import RULES


class UsageReportFilterSet(ApiFilterSet):
    cluster = django_filters.ModelChoiceFilter(
        to_field_name="name", queryset=Cluster.objects.all(), method="keep", help_text="Cluster name."
    )
    namespace = django_filters.CharFilter(method="keep", max_length=253, help_text="Exact namespace.")
    team = django_filters.CharFilter(
        method="keep", max_length=253, help_text="Value of the team pod label (USAGE_TEAM_LABEL)."
    )
    workload_kind = django_filters.CharFilter(method="keep", max_length=63, help_text="Owner workload kind, e.g. Job.")
    workload_name = django_filters.CharFilter(method="keep", max_length=253, help_text="Owner workload name.")
    model = django_filters.CharFilter(method="keep", max_length=253, help_text="Device model (productName).")
    node_pool = django_filters.CharFilter(method="keep", max_length=253, help_text="Node pool (NODE_POOL_LABELS).")
    unit_rule = django_filters.ChoiceFilter(
        choices=[(r, r) for r in RULES], method="keep", help_text="Only allocations counted by this unit rule."
    )

    class Meta:
        model = UsageDay
        fields = ()

    def keep(self, queryset, name, value):
        return queryset  # the values are read from cleaned_data (report_filters)

    def report_filters(self):
        """{column: value} of the filters given (validated)."""
        out = {}
        for name, value in self.form.cleaned_data.items():
            if value in (None, ""):
                continue
            out[name] = value.id if name == "cluster" else value
        return out
