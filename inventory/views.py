"""Inventory pages: fleet map, nodes, devices, device classes, slices and pools (the overview and the node,
device and class pages show claims too: ops/views_fleet.py)."""

from collections import Counter, defaultdict

from django.core.paginator import Paginator
from django.db.models import (
    Case,
    F,
    FloatField,
    IntegerField,
    OuterRef,
    Subquery,
    Sum,
    TextField,
    Value,
    When,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce, Concat
from django.utils.translation import pgettext_lazy

from mirror import roles, tables
from mirror.models import Cluster
from mirror.views import DashboardView, mark_devices

from . import accelerators, devicestate, fleet, pools, summary
from .mapcolours import map_colouring
from .models import Device, DeviceClass, Node, NodeDeviceSummary, ResourceSlice

# What a devices-list row shows (the raw JSON and the API's search copies stay in the database).
PAGE_DEVICE_FIELDS = (
    "id",
    "cluster_id",
    "driver",
    "pool",
    "name",
    "node_name",
    "attributes",
    "capacity",
    "tainted",
    "consumes_counters",
)
INVENTORY_KINDS = ("ResourceSlice", "ResourceClaim", "Node", "DeviceTaintRule", "Finding")  # Finding: stuck devices


# Sortable columns of the fleet map (mirror/tables.py), over its rows grouped per node in SQL
# (FleetMap.rows: the summary's sums): what each row says, the free GPUs of a NotReady node as 0.
MAP_SORT = {
    "cluster": Subquery(Cluster.objects.filter(pk=OuterRef("cluster_id")).values("name")[:1]),
    "node": "sort_key",
    "devices": "total",
    "gpus": "gpus",
    "free_gpus": Case(When(unhealthy=True, then=Value(0)), default=F("gpus_free")),
}


class FleetMapView(DashboardView):
    """Every node a row of device cells. Paginated by node (never sampled): totals always cover the whole fleet."""

    template_name = "inventory/fleet_map.html"
    regions = {"map": "inventory/_fleet_map.html"}
    live_kinds = INVENTORY_KINDS
    nav = "map"
    panels = "map"
    nodes_per_page = 200

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        state = self.request.GET.get("state", "")
        search = self.request.GET.get("q", "").strip()
        error = ""
        if state and state not in fleet.STATES:
            error = f"Unknown state {state!r}: use one of {', '.join(fleet.STATES)}."
        gpu, gpu_error = fleet.gpu_filter(self.request.GET)  # "nodes with ≥ N free GPUs of model X"
        error = error or gpu_error
        # Totals over the whole fleet; rows filtered, ordered and paged in SQL, cells for the page only.
        snap = fleet.FleetSnapshot(self.cluster_ids, user=self.request.user)
        unpublished_only = self.request.GET.get("unpublished") == "1"
        fleet_map = fleet.FleetMap(
            snap, state="" if error else state, search=search, gpu=None if error else gpu, unpublished=unpublished_only
        )
        sort = tables.sorting(
            self.request,
            NodeDeviceSummary,
            MAP_SORT,
            default=("cluster_id", "sort_key"),
            constant={"cluster": self.one_cluster},
        )
        rows = sort.apply(fleet_map.rows, tiebreak=("map_key",))  # grouped rows: (cluster, map_key) is their key
        ctx.update(self.paginate(rows.none() if error else rows, self.nodes_per_page))
        page = ctx["page_obj"]
        page.object_list = fleet_map.decide(page.object_list)
        mark_devices([d for r in page.object_list for d in r["devices"]])  # health markers (health/pages.py)
        names = {c.id: c.name for c in Cluster.objects.all()}
        page_sources = (
            accelerators.node_sources(nodes={(r["cluster_id"], r["node"]) for r in page.object_list})
            if page.object_list
            else {}
        )
        for r in page.object_list:
            r["cluster_name"] = names.get(r["cluster_id"], "?")
            r["sources"] = page_sources.get((r["cluster_id"], r["node"]), {})  # device plugin, HAMi beside DRA
        sources = fleet.template_sources(snap)
        ctx["outside_dra"] = (
            self._outside_dra(sources, names, search) if not (state or gpu or unpublished_only or error) else None
        )
        # Utilization colours come from monitoring, which registers them (inventory/mapcolours.py).
        attach = map_colouring("utilization") if self.request.GET.get("colour") == "utilization" else None
        colour = "utilization" if attach is not None else "state"
        if attach is not None:
            attach([d for r in page.object_list for d in r["devices"]])
        ctx.update(
            sorting=sort,
            colour=colour,
            totals=snap.totals(),
            states=fleet.STATES,
            state_labels=fleet.STATE_LABELS,
            display_states=fleet.DISPLAY_STATES,
            flag_labels=fleet.FLAG_LABELS,
            state=state,
            q=search,
            row_count=page.paginator.count,
            error=error,
            kinds=snap.kind_totals(),
            unpublished=snap.unpublished(),
            sources=sources,
            gpu=gpu,
            gpu_models=fleet.gpu_filter_models(self.cluster_ids),
            gpu_query=fleet.gpu_query(self.request.GET),
            gpu_sources=fleet.GPU_SOURCES,
            unpublished_only=unpublished_only,
        )
        return ctx

    def _outside_dra(self, sources, names, search):
        """Rows for the nodes whose GPUs only a device plugin or HAMi serves (no DRA devices, so no row
        above): their own pages (?other_page=), cells per source. The state filters are about DRA
        devices and leave them out."""
        if not (sources["device_plugin"]["nodes"] or sources["hami"]["nodes"]):
            return None  # nothing served outside DRA: no query
        page = Paginator(accelerators.nodes_outside_dra(self.cluster_ids, search), self.nodes_per_page).get_page(
            self.request.GET.get("other_page")
        )
        keys = list(page.object_list)
        per_node = accelerators.node_sources(nodes=set(keys)) if keys else {}
        page.rows = [
            {
                "cluster_id": cid,
                "node": node,
                "cluster_name": names.get(cid, "?"),
                "sources": per_node.get((cid, node), {}),
            }
            for cid, node in keys
        ]
        return page


def node_sort_columns(stuck=None):
    """Sortable columns of the nodes list (mirror/tables.py), all in SQL. The device and GPU counts
    are the node's per-node summary rows summed (a correlated sum on the summary's (cluster, node)
    index, evaluated for the sort only), with what the page shows applied as FleetSnapshot does:
    nothing free on a NotReady node, and allocated devices held by stuck claims not counted as
    allocated (`stuck`: FleetSnapshot.stuck, the few devices of stuck claims)."""
    per_node = (
        NodeDeviceSummary.objects.filter(cluster_id=OuterRef("cluster_id"), node_name=OuterRef("name"))
        .order_by()
        .values("cluster_id", "node_name")
    )

    def summed(column):
        return Coalesce(
            Subquery(per_node.annotate(s=Sum(column)).values("s")[:1], output_field=IntegerField()), Value(0)
        )

    def on_ready(expr):
        return Case(When(ready=False, then=Value(0)), default=expr, output_field=IntegerField())

    stuck_allocated = Counter()
    for (cluster_id, _driver, _pool, node_name, *_rest), counts in (stuck or {}).items():
        if node_name and counts.get(fleet.ALLOCATED):
            stuck_allocated[(cluster_id, node_name)] += counts[fleet.ALLOCATED]
    by_count = defaultdict(
        lambda: defaultdict(list)
    )  # k -> cluster -> nodes with k such devices: a few IN lists, not a WHEN per node
    for (c, n), k in sorted(stuck_allocated.items()):
        by_count[k][c].append(n)
    held_stuck = Case(
        *[
            When(cluster_id=c, name__in=names, then=Value(k))
            for k, clusters in sorted(by_count.items())
            for c, names in sorted(clusters.items())
        ],
        default=Value(0),
        output_field=IntegerField(),
    )
    return {
        "cluster": "cluster__name",
        "name": "name",
        "ready": "ready",
        "since": "ready_changed_at",
        "devices": summed("n_total"),
        "free": on_ready(summed("n_free")),
        "allocated": summed("n_allocated") - held_stuck,
        "gpus": summed("n_gpus"),
        "free_gpus": on_ready(summed("n_gpus_free")),
    }


NODE_SORT = node_sort_columns()  # the column names (bench/bench_ui.py); the view builds them per request


class NodeListView(DashboardView):
    """Nodes, filtered like GET /api/v1/nodes/ (the same FilterSet): name, Ready, "at least N free
    GPUs of model X" (the fleet map's GPU filter), and the API's other filters."""

    template_name = "inventory/node_list.html"
    regions = {"nodes": "inventory/_node_table.html"}
    live_kinds = ("Node", "ResourceSlice", "ResourceClaim")
    nav = "nodes"

    def get_context_data(self, **kwargs):
        from .filtersets import NodeFilterSet

        ctx = super().get_context_data(**kwargs)
        q = self.request.GET.get("q", "").strip()
        ready = self.request.GET.get("ready", "")
        nodes, filterset = self.filter_with(NodeFilterSet, self.in_cluster(Node.objects.select_related(None)))
        gpu_error = " ".join(
            str(message)
            for field in ("min_free_gpus", "gpu_model", "gpu_source")
            for message in filterset.errors.get(field, ())
        )
        counted = {"allocated"} & {c for c, _desc in tables.sorting(self.request, Node, NODE_SORT).order}
        stuck = fleet.FleetSnapshot(self.cluster_ids).stuck if counted else None  # only a sort by allocated needs them
        sort = tables.sorting(
            self.request,
            Node,
            node_sort_columns(stuck),
            default=("cluster_id", "name"),
            constant={"cluster": self.one_cluster},
        )
        nodes = sort.apply(nodes)
        fields = ("id", "cluster_id", "name", "ready", "ready_changed_at", "unschedulable", "taints", "labels")
        ctx.update(self.paginate(nodes.only(*fields), 100))
        page_nodes = list(ctx["page_obj"].object_list)
        # Device counts per node for the page only: one grouped query, one allocation lookup.
        keys = {(n.cluster_id, n.name) for n in page_nodes}
        page_snap = (
            fleet.FleetSnapshot(list({k[0] for k in keys}), user=self.request.user, nodes=keys) if keys else None
        )
        per_node = page_snap.node_counts() if keys else {}
        kinds = page_snap.node_gpu_counts() if keys else {}  # whole GPUs, partitions, other devices
        sources = accelerators.node_sources(nodes=keys) if keys else {}  # device plugin, HAMi
        unpublished = page_snap.unpublished()["rows"] if keys else {}
        names = {c.id: c.name for c in Cluster.objects.all()}
        for n in page_nodes:
            n.counts = dict(per_node.get((n.cluster_id, n.name), {"total": 0}))
            n.cluster_name = names.get(n.cluster_id)
            n.kinds = kinds.get((n.cluster_id, n.name), {})
            n.sources = sources.get((n.cluster_id, n.name), {})
            n.unpublished = unpublished.get((n.cluster_id, n.name))
        ctx.update(
            nodes=page_nodes,
            q=q,
            ready=ready,
            sorting=sort,
            filter_errors={
                k: v for k, v in filterset.errors.items() if k not in ("min_free_gpus", "gpu_model", "gpu_source")
            },
            gpu_error=gpu_error,
            gpu_models=fleet.gpu_filter_models(self.cluster_ids),
            gpu_query=fleet.gpu_query(self.request.GET),
            gpu_sources=fleet.GPU_SOURCES,
        )
        return ctx


def device_sort_columns(user, not_ready=None):
    """Sortable columns of the devices list, all in SQL: the model as the overview groups it, the
    memory capacity as a number (the searchable copy in base units), the state by its label (the
    badge the page shows), the holder by the stored deciding claim."""
    # devicestate.state_q's conditions are exclusive (one primary state per device): each gives its label.
    state_label = Case(
        *[When(devicestate.state_q(s, not_ready), then=Value(fleet.state_label(s))) for s in fleet.STATES],
        output_field=TextField(),
    )
    holder = Concat("held_by_namespace", Value("/"), "held_by_name", output_field=TextField())
    scope = roles.visible_namespaces(user)
    if scope is not None:  # holders the user may not see sort together, not by their hidden names
        holder = Case(
            When(held_by_namespace__in=scope, then=holder),
            When(held_by_name="", then=Value("")),
            default=Value("\uffff"),
            output_field=TextField(),
        )
    return {
        "cluster": "cluster__name",
        "node": "node_name",
        "name": "name",
        "driver": "driver",
        "pool": "pool",
        "model": summary.MODEL,
        "memory": Cast(KT("capacity_values__memory"), FloatField()),
        "state": state_label,
        "holder": holder,
    }


# The devices page's health filter, worst first (the labels are the health app's words, in context).
HEALTH_LABELS = {
    "unhealthy": pgettext_lazy("device health", "unhealthy"),
    "degraded": pgettext_lazy("device health", "degraded"),
    "unknown": pgettext_lazy("device health", "health unknown"),
    "healthy": pgettext_lazy("device health", "healthy"),
}


class DeviceListView(DashboardView):
    """Devices, filtered like GET /api/v1/devices/ (the same FilterSet): the filter language (`q`),
    state, flag, health, driver, pool, node, kind, and the API's other filters."""

    template_name = "inventory/device_list.html"
    regions = {"devices": "inventory/_device_table.html"}
    live_kinds = ("ResourceSlice", "ResourceClaim", "Node")
    nav = "devices"
    # The page's `state` (overview tiles, map legend, bookmarks) is the dashboard's state vocabulary:
    # the FilterSet's `fleet_state` (its `state` is the API's v1 projection).
    filter_aliases = {"state": "fleet_state"}

    def get_context_data(self, **kwargs):
        from .filtersets import DeviceFilterSet

        ctx = super().get_context_data(**kwargs)
        get = self.request.GET
        not_ready = devicestate.not_ready_nodes(self.cluster_ids)  # read once: the state filters and sort use it
        devices = self.in_cluster(Device.objects.all()).knowing_not_ready(not_ready)
        qs, filterset = self.filter_with(DeviceFilterSet, devices)
        error = " ".join(str(message) for messages in filterset.errors.values() for message in messages)
        state, flag = get.get("state", ""), get.get("flag", "")
        sort = tables.sorting(
            self.request,
            Device,
            device_sort_columns(self.request.user, not_ready),
            default=("cluster_id", "node_name", "driver", "pool", "name"),
            constant={"cluster": self.one_cluster},
        )
        ctx.update(self.paginate(sort.apply(qs).only(*PAGE_DEVICE_FIELDS), 200))
        page_devices = list(ctx["page_obj"].object_list)
        page_devices = fleet.states_for(page_devices, self.cluster_ids, user=self.request.user)
        names = {c.id: c.name for c in Cluster.objects.all()}
        for d in page_devices:
            d.cluster_name = names.get(d.cluster_id)
            d.model = d.attribute_value("productName") or d.attribute_value("model") or ""
        ctx["devices"] = page_devices
        # The driver choices from the per-node summary (a few thousand rows), not a DISTINCT over every device.
        drivers = (
            self.in_cluster(NodeDeviceSummary.objects.exclude(n_total=0))
            .values_list("driver", flat=True)
            .distinct()
            .order_by("driver")
        )
        ctx.update(
            q=get.get("q", ""),
            error=error,
            state=state,
            flag=flag,
            flags=fleet.FLAGS,
            flag_labels=fleet.FLAG_LABELS,
            health=get.get("health", ""),
            health_labels=HEALTH_LABELS,
            driver=get.get("driver", ""),
            pool=get.get("pool", ""),
            node=get.get("node", ""),
            drivers=list(drivers),
            states=fleet.STATES,
            state_labels=fleet.STATE_LABELS,
            match_count=ctx["page_obj"].paginator.count,
            sorting=sort,
        )
        return ctx


CLASS_SORT = {
    "cluster": "cluster__name",
    "name": "name",
    "extended": "extended_resource_name",
    "matching": "match_count",
}
# The pools list is built in Python (pools.pool_summaries): every column sorts there.
POOL_SORT = dict.fromkeys(("cluster", "driver", "pool", "generation", "slices", "devices", "nodes", "problems"))
POOL_SORT_KEYS = {
    "cluster": lambda p: p["cluster_name"],
    "driver": lambda p: p["driver"],
    "pool": lambda p: p["pool"],
    "generation": lambda p: p["generation"],
    "slices": lambda p: p["slices"],
    "devices": lambda p: p["devices"],
    "nodes": lambda p: " ".join(p["nodes"]) or None,
    "problems": lambda p: len(p["problems"]),
}


class DeviceClassListView(DashboardView):
    template_name = "inventory/class_list.html"
    regions = {"classes": "inventory/_class_table.html"}
    live_kinds = ("DeviceClass", "ResourceSlice")
    nav = "classes"

    def get_context_data(self, **kwargs):
        from . import classmatch, tasks

        ctx = super().get_context_data(**kwargs)
        sort = tables.sorting(self.request, DeviceClass, CLASS_SORT, default=("cluster_id", "name"))
        classes = list(sort.apply(self.in_cluster(DeviceClass.objects.all())))
        # Stored counts only (counting takes seconds on a large fleet): what is out of date says so
        # and asks the background job for a recount, which the sync has usually asked for already.
        versions = classmatch.inventory_versions(self.cluster_ids)
        names = {c.id: c.name for c in Cluster.objects.all()}
        for c in classes:
            c.cluster_name = names.get(c.cluster_id)
            c.match_current = classmatch.is_current(c, versions)
        for cluster_id in sorted({c.cluster_id for c in classes if not c.match_current}):
            tasks.request_after_commit(cluster_id)
        ctx.update(classes=classes, sorting=sort)
        return ctx


SLICE_SORT = {
    "cluster": "cluster__name",
    "name": "name",
    "driver": "driver",
    "pool": "pool",
    "generation": "pool_generation",
    "node": "node_name",
    "devices": "device_count",
    "created": "creation_timestamp",
}


class SliceListView(DashboardView):
    """ResourceSlices, filtered like GET /api/v1/resource-slices/ (the same FilterSet): driver, pool, node, name."""

    template_name = "inventory/slice_list.html"
    regions = {"slices": "inventory/_slice_table.html"}
    live_kinds = ("ResourceSlice",)
    nav = "slices"

    def get_context_data(self, **kwargs):
        from .filtersets import ResourceSliceFilterSet

        ctx = super().get_context_data(**kwargs)
        listed = self.in_cluster(ResourceSlice.objects.select_related("cluster").defer("raw"))
        slices, filterset = self.filter_with(ResourceSliceFilterSet, listed)
        sort = tables.sorting(
            self.request,
            ResourceSlice,
            SLICE_SORT,
            default=("cluster_id", "driver", "pool", "name"),
            constant={"cluster": self.one_cluster},
        )
        ctx.update(self.paginate(sort.apply(slices), 200))
        ctx.update(
            sorting=sort,
            filter_errors=filterset.errors,
            filters={k: self.request.GET.get(k, "") for k in ("driver", "pool", "node", "name")},
            drivers=listed.order_by("driver").values_list("driver", flat=True).distinct(),
        )
        return ctx


class PoolListView(DashboardView):
    template_name = "inventory/pool_list.html"
    regions = {"pools": "inventory/_pool_table.html"}
    live_kinds = ("ResourceSlice",)
    nav = "pools"

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        rows = pools.pool_summaries(self.in_cluster(ResourceSlice.objects.all()))
        only_bad = self.request.GET.get("problems") == "1"
        if only_bad:
            rows = [r for r in rows if r["problems"]]
        sort = tables.sorting(self.request, ResourceSlice, POOL_SORT)
        sort.sort_rows(rows, POOL_SORT_KEYS)
        ctx.update(self.paginate(rows, 200))
        pools.with_partition_capacity(ctx["page_obj"].object_list)
        ctx.update(only_bad=only_bad, problem_count=sum(1 for r in rows if r["problems"]), sorting=sort)
        return ctx
