"""A namespace's page of history charts (the overview links each namespace here)."""

from django.http import Http404

from claims.models import Pod, ResourceClaim
from mirror import roles
from mirror.views import DashboardView

from .models import NamespaceSample


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
