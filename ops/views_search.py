"""The global search page (the search box in the navigation submits here)."""

from mirror.views import DashboardView

from . import search


class SearchView(DashboardView):
    template_name = "search.html"
    nav = "search"

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        q = self.request.GET.get("q", "")
        groups = search.search(q, self.request.user, cluster=self.cluster, namespace=self.namespace)
        ctx.update(search_q=q.strip(), groups=groups, hit_count=sum(len(g.hits) for g in groups), limit=search.LIMIT)
        return ctx
