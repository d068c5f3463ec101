"""Cluster readiness page: the checks of ops/readiness.py for the selected cluster (or each cluster)."""

from mirror.models import Cluster
from mirror.views import DashboardView

from .readiness import run_checks


class ReadinessView(DashboardView):
    template_name = "inventory/readiness.html"
    nav = "readiness"

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        # Live checks cost a few API calls each: one cluster at a time, the selected one or the first.
        target = self.cluster or Cluster.objects.filter(enabled=True).first()
        ctx["report"] = run_checks(target) if target else None
        ctx["target_cluster"] = target
        return ctx
