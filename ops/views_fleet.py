"""The fleet's pages that show claims beside the devices: the overview (who holds what), a node (its
pods and driver logs), a device (the claims and pods holding it, past claims) and a device class (the
claims asking for it). They read inventory and claims together, so they live above both; their URLs keep
their inventory: names (ops/urls.py)."""

from collections import defaultdict

from django.db.models import Count, Q
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils.translation import gettext as _

from claims import driverlogs
from claims.models import AllocationResult, ClaimConsumer, ClaimStateChange, Pod, ResourceClaim, ResourceClaimTemplate
from inventory import accelerators, classmatch, fleet, vanished
from inventory.models import Device, DeviceClass, Node, ResourceSlice, SharedCounterSet
from inventory.views import INVENTORY_KINDS
from mirror import roles
from mirror.objectpage import crumb, device_kubectl_commands, object_page
from mirror.views import DashboardView, ObjectGone


class OverviewView(DashboardView):
    template_name = "inventory/overview.html"
    regions = {"overview": "inventory/_overview.html"}
    live_kinds = INVENTORY_KINDS
    nav = "overview"
    panels = "overview"

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        snap = fleet.FleetSnapshot(self.cluster_ids, user=self.request.user)
        nodes = self.in_cluster(Node.objects.all())
        ctx.update(
            totals=snap.totals(),
            by_model=snap.by_model(),
            namespaces=namespace_holdings(snap),
            fragmentation=snap.fragmentation(),
            # COUNT(*) over the (cluster, ready) and (cluster, state) indexes: index-only scans, not a
            # scan of every row's raw JSON.
            node_counts=nodes.aggregate(total=Count("*"), not_ready=Count("ready", filter=Q(ready=False))),
            claim_counts=dict(
                roles.scope_queryset(self.in_cluster(ResourceClaim.objects.all()), self.request.user)
                .values_list("state")
                .annotate(n=Count("*"))
            ),
            states=fleet.STATES,
            state_labels=fleet.STATE_LABELS,
            display_states=fleet.DISPLAY_STATES,
            flag_labels=fleet.FLAG_LABELS,
            **fleet.kinds_context(snap),  # whole GPUs, partitions, other devices; sources side by side
        )
        return ctx


def namespace_holdings(snap):
    """Who holds what: namespace -> claims and devices held (only namespaces the user may see), in the
    snapshot's clusters and as shares of its devices."""
    results = AllocationResult.objects.filter(admin_access=False)
    if snap.cluster_ids is not None:
        results = results.filter(cluster_id__in=snap.cluster_ids)
    scope = roles.visible_namespaces(snap.user) if snap.user is not None else None
    if scope is not None:
        results = results.filter(namespace__in=scope)
    # The results' own namespace column: no join to each result's claim row.
    rows = (
        results.values_list("namespace")
        .annotate(devices=Count("id"), claims=Count("claim_id", distinct=True))
        .order_by("-devices", "namespace")
    )
    total = snap.total or 1
    return [
        {"namespace": ns, "devices": n, "claims": claims, "share_pct": round(100 * n / total, 1)}
        for ns, n, claims in rows
    ]


class NodeDetailView(DashboardView):
    template_name = "inventory/node_detail.html"
    regions = {"devices": "inventory/_node_devices.html"}
    nav = "nodes"
    panels = "node"

    def live_scope(self):
        return {"cluster": self.node.cluster_id, "node": self.node.name}

    def look_up(self, request, **kwargs):
        self.node = get_object_or_404(Node, cluster__name=kwargs["cluster"], name=kwargs["name"])

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        node = self.node
        slices = ResourceSlice.objects.filter(cluster_id=node.cluster_id, node_name=node.name).order_by(
            "driver", "pool", "name"
        )
        devices = fleet.states_for(
            Device.objects.filter(cluster_id=node.cluster_id, node_name=node.name).order_by("driver", "pool", "name"),
            user=self.request.user,
        )
        devices.sort(key=lambda d: (d.driver, d.pool, fleet.natural_key(d.name)))
        devices = fleet.under_parents(
            devices, lambda d: (d.driver, d.pool), lambda d: d.name, lambda d: d.kind, lambda d: d.parent
        )  # partitions under their GPU
        pods = _pods_by_claim(node.cluster_id, [h for d in devices for h in d.st.holders if h.visible])
        for d in devices:
            d.holder_rows = [(h, pods.get((h.namespace, h.name), [])) for h in d.st.holders]
        crumbs = [crumb(_("Nodes"), "inventory:node-list", query=f"cluster={node.cluster.name}"), crumb(node.name)]
        keys = {(node.cluster_id, node.name)}
        node_snap = fleet.FleetSnapshot([node.cluster_id], nodes=keys)
        node_sources = dict(accelerators.node_sources(nodes=keys).get((node.cluster_id, node.name), {}))
        if node_sources.get("hami"):  # HAMi's pods, as the device holders
            node_sources["hami"] = accelerators.scoped_hami(
                node_sources["hami"], roles.visible_namespaces(self.request.user)
            )
        ctx.update(
            node_kinds=node_snap.node_gpu_counts().get((node.cluster_id, node.name), {}),
            node_sources=node_sources,
            node_unpublished=node_snap.unpublished()["rows"].get((node.cluster_id, node.name)),
        )
        ctx.update(
            node=node,
            slices=slices,
            devices=devices,
            state_labels=fleet.STATE_LABELS,
            pods=roles.scope_queryset(
                Pod.objects.filter(cluster_id=node.cluster_id, node_name=node.name), self.request.user
            ).order_by("namespace", "name"),
            **object_page(node.cluster, "Node", node.raw, node.name, uid=node.uid, crumbs=crumbs),
        )
        if not self.request.GET.get("fragment"):  # live region refreshes do not go to the API server
            ctx.update(
                driverlogs.page_context(node.cluster, node.name, namespaces=roles.driver_namespaces(self.request.user))
            )
        return ctx


def _pods_by_claim(cluster_id, holders):
    """(namespace, claim) -> pods reserving it, for a set of holders."""
    uids = {h.uid for h in holders}
    out = defaultdict(list)
    for ns, claim, pod in ClaimConsumer.objects.filter(cluster_id=cluster_id, claim__uid__in=uids).values_list(
        "claim__namespace", "claim__name", "name"
    ):
        out[(ns, claim)].append(pod)
    return out


class DeviceDetailView(DashboardView):
    template_name = "inventory/device_detail.html"
    regions = {"claims": "inventory/_device_claims.html"}
    live_kinds = ("ResourceSlice", "ResourceClaim")
    nav = "devices"
    panels = "device"

    def look_up(self, request, **kwargs):
        self.device = (
            Device.objects.select_related("slice")
            .filter(
                cluster__name=kwargs["cluster"], driver=kwargs["driver"], pool=kwargs["pool"], name=kwargs["device"]
            )
            .first()
        )
        if self.device is None:
            record = vanished.last_device(kwargs["cluster"], kwargs["driver"], kwargs["pool"], kwargs["device"])
            if record is None:
                raise Http404("No such device (it may have been removed from its ResourceSlice).")
            raise ObjectGone(record)

    def live_scope(self):
        return {"cluster": self.device.cluster_id, "kind": list(self.live_kinds)}

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        device = fleet.states_for([self.device], user=self.request.user)[0]
        counter_sets = {cs.name: cs.counters for cs in device.slice.counter_sets.all()}
        if device.consumes_counters and not counter_sets:
            counter_sets = dict(
                SharedCounterSet.objects.filter(
                    cluster_id=device.cluster_id, slice__driver=device.driver, slice__pool=device.pool
                ).values_list("name", "counters")
            )
        results = AllocationResult.objects.filter(
            cluster_id=device.cluster_id, driver=device.driver, pool=device.pool, device=device.name
        ).select_related("claim")
        results = [r for r in results if roles.can_see_namespace(self.request.user, r.claim.namespace)]
        # Past claims: state changes of claims that once held this device (node-level history, best effort).
        past = (
            roles.scope_queryset(
                ClaimStateChange.objects.filter(
                    cluster_id=device.cluster_id, node_name=device.node_name, new_state="deleted"
                ).order_by("-at"),
                self.request.user,
            )[:20]
            if device.node_name
            else []
        )
        cluster = device.slice.cluster
        crumbs = [crumb(_("Devices"), "inventory:device-list", query=f"cluster={cluster.name}")]
        if device.node_name:
            crumbs.append(crumb(device.node_name, "inventory:node-detail", cluster.name, device.node_name))
        crumbs += [
            crumb(device.slice.name, "inventory:slice-detail", cluster.name, device.slice.name),
            crumb(device.name),
        ]
        # The pods holding the device: the consumers of the claims allocated to it.
        holding = Pod.objects.filter(
            cluster_id=device.cluster_id,
            uid__in=ClaimConsumer.objects.filter(claim__in=[r.claim for r in results]).values("uid"),
        )
        ctx.update(
            object_page(
                cluster,
                "ResourceSlice",
                device.raw,
                device.slice.name,
                events=False,
                crumbs=crumbs,
                kubectl=device_kubectl_commands(cluster, device.slice.name, device.name),
            )
        )
        ctx.update(
            device=device,
            holding_pods=list(
                holding.order_by("namespace", "name").only("cluster_id", "namespace", "name", "phase", "node_name")
            ),
            matching_classes=classmatch.classes_matching(device),
            attributes=sorted(device.attributes.items()),
            capacity=sorted(device.capacity.items()),
            counter_sets=counter_sets,
            results=results,
            past=past,
            hidden_holders=sum(1 for h in device.st.holders if not h.visible),
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
