"""Object page of ResourceSlices (a device class's page lists the claims asking for it: ops/views_fleet.py;
nodes and devices are in views.py and ops/views_fleet.py). Each shows the object, links both ways, its YAML,
kubectl commands and mirrored Events (mirror/objectpage.py)."""

from django.http import Http404
from django.utils.translation import gettext as _

from mirror.objectpage import crumb, object_page
from mirror.views import DashboardView, ObjectGone

from . import fleet, vanished
from .models import Device, ResourceSlice


class SliceDetailView(DashboardView):
    template_name = "inventory/slice_detail.html"
    live_kinds = ("ResourceSlice", "ResourceClaim", "Event")
    nav = "pools"

    def look_up(self, request, **kwargs):
        self.slice = (
            ResourceSlice.objects.select_related("cluster")
            .filter(cluster__name=kwargs["cluster"], name=kwargs["name"])
            .first()
        )
        if self.slice is None:
            record = vanished.last_slice(kwargs["cluster"], kwargs["name"])
            if record is None:
                raise Http404("No such ResourceSlice.")
            raise ObjectGone(record)

    def live_scope(self):
        return {"cluster": self.slice.cluster_id, "kind": list(self.live_kinds)}

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        s = self.slice
        devices = fleet.states_for(Device.objects.filter(slice=s), user=self.request.user)
        devices.sort(key=lambda d: fleet.natural_key(d.name))
        siblings = (
            ResourceSlice.objects.filter(cluster_id=s.cluster_id, driver=s.driver, pool=s.pool)
            .exclude(pk=s.pk)
            .order_by("name")
        )
        crumbs = [
            crumb(_("Pools"), "inventory:pool-list", query=f"cluster={s.cluster.name}"),
            crumb(f"{s.driver} / {s.pool}"),
        ]
        if s.node_name:
            crumbs.insert(1, crumb(s.node_name, "inventory:node-detail", s.cluster.name, s.node_name))
        crumbs.append(crumb(s.name))
        ctx.update(
            slice=s,
            devices=devices,
            siblings=siblings,
            counter_sets=list(s.counter_sets.all()),
            **object_page(s.cluster, "ResourceSlice", s.raw, s.name, uid=s.uid, crumbs=crumbs),
        )
        return ctx
