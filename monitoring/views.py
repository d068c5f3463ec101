"""A namespace's page of history charts (the overview links each namespace here), and the DRA control
plane's metrics page."""

from django.core.exceptions import BadRequest
from django.http import Http404
from django.utils.translation import gettext as _

from claims.models import Pod, ResourceClaim
from mirror import roles
from mirror.views import DashboardView

from . import drametrics
from .models import NamespaceSample, PrometheusSource


class NamespaceHistoryView(DashboardView):
    template_name = "monitoring/namespace_history.html"
    nav = "overview"

    def look_up(self, request, **kwargs):
        self.history_namespace = kwargs["namespace"]
        # A namespace outside the user's scope does not exist for them (as a claim there would not).
        if not roles.can_see_namespace(request.user, self.history_namespace):
            raise Http404("No such namespace.")

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        ns = self.history_namespace
        ctx.update(
            history_namespace=ns,
            claim_count=self.in_cluster(ResourceClaim.objects.filter(namespace=ns)).count(),
            pod_count=self.in_cluster(Pod.objects.filter(namespace=ns)).count(),
            sampled=NamespaceSample.objects.filter(namespace=ns).exists(),
        )
        return ctx


class DRAMetricsView(DashboardView):
    """The DRA control plane's metrics (monitoring/drametrics.py) from the selected cluster's Prometheus,
    or the first cluster that has one configured."""

    template_name = "monitoring/dra_metrics.html"
    nav = "dra-metrics"
    # The figures arrive as their queries finish: the page shows those done within FIRST_PAINT seconds
    # and static/gpudash/dra_metrics.js asks for ?fragment=figures&seen=N, which answers when more are
    # done (at most FRAGMENT_WAIT seconds later), until all are. The queries run on drametrics' pool, so
    # no request thread waits on Prometheus for longer than these.
    regions = {"figures": "monitoring/_dra_figures.html"}
    FIRST_PAINT = 0.3
    FRAGMENT_WAIT = 5.0

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        window = self.request.GET.get("window") or drametrics.DEFAULT_WINDOW
        if window not in drametrics.WINDOWS:
            raise BadRequest(_("window must be one of %(windows)s.") % {"windows": ", ".join(drametrics.WINDOWS)})
        sources = PrometheusSource.objects.select_related("cluster").filter(enabled=True)
        source = (
            sources.filter(cluster=self.cluster).first()
            if self.cluster is not None
            else sources.order_by("cluster__name").first()
        )
        ctx.update(
            source=source,
            target_cluster=self.cluster or (source.cluster if source else None),
            window=window,
            windows=drametrics.WINDOWS,
            node_label=drametrics.node_label(),
        )
        if source is not None:
            evaluation = drametrics.cached(source, window)
            if self.request.GET.get("fragment") == "figures":
                try:
                    seen = int(self.request.GET.get("seen", "0")[:6])
                except ValueError:
                    seen = 0
                evaluation.wait_for_more(seen, self.FRAGMENT_WAIT)
            else:
                evaluation.wait(self.FIRST_PAINT)
            done = {id(r) for r in evaluation.results if evaluation.finished(r)}
            ctx.update(
                evaluation=evaluation,
                figures_done=len(done),
                figures_pending=len(evaluation.results) - len(done),
                components=[
                    (key, title, [(r, *drametrics.page_rows(r)) if id(r) in done else (r, None, 0) for r in figures])
                    for key, title, figures in drametrics.grouped(evaluation.results)
                ],
            )
        return ctx
