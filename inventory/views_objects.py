"""Object pages of the inventory kinds that have no list of their own rows elsewhere: ResourceSlices and
DeviceClasses (nodes and devices are in views.py). Each shows the object, links both ways, its YAML,
kubectl commands and mirrored Events (mirror/objectpage.py)."""

from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils.translation import gettext as _

from claims.models import ResourceClaim, ResourceClaimTemplate
from mirror import roles
from mirror.objectpage import crumb, object_page
from mirror.views import DashboardView, ObjectGone

from . import fleet, vanished
from .models import Device, DeviceClass, ResourceSlice


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


class DeviceClassDetailView(DashboardView):
    template_name = "inventory/class_detail.html"
    live_kinds = ("DeviceClass", "ResourceClaim", "Event")
    nav = "classes"

    def look_up(self, request, **kwargs):
        self.device_class = get_object_or_404(
            DeviceClass.objects.select_related("cluster"), cluster__name=kwargs["cluster"], name=kwargs["name"]
        )

    def live_scope(self):
        return {"cluster": self.device_class.cluster_id, "kind": list(self.live_kinds)}

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        c = self.device_class
        # device_classes is a JSON list; icontains on its text works on PostgreSQL and SQLite alike.
        needle = f'"{c.name}"'
        claims = roles.scope_queryset(
            ResourceClaim.objects.filter(cluster_id=c.cluster_id, device_classes__icontains=needle), self.request.user
        )
        templates = roles.scope_queryset(
            ResourceClaimTemplate.objects.filter(cluster_id=c.cluster_id, device_classes__icontains=needle),
            self.request.user,
        )
        crumbs = [crumb(_("Classes"), "inventory:class-list", query=f"cluster={c.cluster.name}"), crumb(c.name)]
        ctx.update(
            device_class=c,
            selectors=c.selectors,
            config=c.spec.get("config") or [],
            claims=claims.order_by("namespace", "name").only(
                "cluster_id", "namespace", "name", "state", "node_name", "device_classes"
            )[:200],
            claim_count=claims.count(),
            templates=templates.order_by("namespace", "name")[:200],
            **object_page(c.cluster, "DeviceClass", c.raw, c.name, uid=c.uid, crumbs=crumbs),
        )
        return ctx
