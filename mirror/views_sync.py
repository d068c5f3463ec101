"""Sync status page: which worker holds which (cluster, kind) lease, and each worker's share."""

from mirror.sync.workers import lease_table
from mirror.views import DashboardView


class SyncStatusView(DashboardView):
    template_name = "gpudash/sync_status.html"
    nav = "sync"
    regions = {"leases": "gpudash/_sync_leases.html"}
    live_kinds = ("ResourceClaim", "ResourceSlice", "Node", "Pod")

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        shares, rows = lease_table()
        if self.cluster is not None:
            rows = [r for r in rows if r.state.cluster_id == self.cluster.id]
        wanted = sum(1 for r in rows if r.owner)
        ctx.update(
            shares=shares,
            lease_rows=rows,
            wanted=wanted,
            live_count=sum(1 for s in shares if s.live),
            handing_over=sum(1 for r in rows if r.handing_over),
            unheld=sum(1 for r in rows if r.owner and not r.held),
        )
        return ctx
