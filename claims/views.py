"""Claim pages: claims list and detail, pods using claims (the allocation preview page is ops/views_preview.py)."""

from django.db.models import Exists, OuterRef
from django.db.models.fields.json import KeyTextTransform
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils.translation import gettext
from django.utils.translation import gettext as _

from mirror import published, roles, tables
from mirror.models import Cluster
from mirror.objectpage import crumb, object_page
from mirror.views import DashboardView

from . import devicestatus_pages
from .answers import headline_text, present
from .lookups import claim_keys_q
from .models import ACTION_TITLES, ClaimStateChange, Finding, Pod, PodClaimRef, ResourceClaim, ResourceClaimTemplate

STUCK = "stuck"
CLAIM_STATES = [s for s, _ in ResourceClaim.State.choices] + [STUCK]
# Sortable columns of the claims and pods lists (mirror/tables.py). The device classes sort by the
# first (the stored list is sorted); a claim without one last.
CLAIM_SORT = {
    "cluster": "cluster__name",
    "namespace": "namespace",
    "name": "name",
    "state": "state",
    "node": "node_name",
    "classes": KeyTextTransform("0", "device_classes"),
    "owner": "owner_pod_name",
    "created": "creation_timestamp",
}
POD_SORT = {"cluster": "cluster__name", "namespace": "namespace", "name": "name", "phase": "phase", "node": "node_name"}


def claims_with_flags(queryset):
    """Claims annotated with `is_stuck` (an active finding names them)."""
    findings = Finding.objects.stuck().filter(cluster_id=OuterRef("cluster_id"), claim_uid=OuterRef("uid"))
    return queryset.annotate(is_stuck=Exists(findings))


def list_namespace(view):
    """A namespaced list's namespace: its own ?namespace= filter (for this request only, as every
    filter of the page), else the global selector's (mirror/views.py)."""
    if "namespace" in view.request.GET:
        return view.request.GET["namespace"].strip()  # as asked, even if hidden: the scoped queryset then shows nothing
    return view.namespace


TEMPLATE_SORT = {"cluster": "cluster__name", "namespace": "namespace", "name": "name", "created": "creation_timestamp"}


class TemplateListView(DashboardView):
    """ResourceClaimTemplates in the user's namespaces, filtered like GET /api/v1/claim-templates/ (the
    same FilterSet): namespace (the global selector's by default), device class, name."""

    template_name = "claims/template_list.html"
    regions = {"templates": "claims/_template_table.html"}
    live_kinds = ("ResourceClaimTemplate",)
    nav = "templates"

    def live_scope(self):
        scope = super().live_scope()
        namespace = list_namespace(self)
        if namespace and roles.can_see_namespace(self.request.user, namespace):
            scope["namespace"] = namespace
        return scope

    def get_context_data(self, **kwargs):
        from .filtersets import ResourceClaimTemplateFilterSet

        ctx = super().get_context_data(**kwargs)
        visible = roles.scope_queryset(
            self.in_cluster(ResourceClaimTemplate.objects.select_related("cluster")), self.request.user
        )
        templates, filterset = self.filter_with(ResourceClaimTemplateFilterSet, visible, namespace=self.namespace)
        sort = tables.sorting(
            self.request,
            ResourceClaimTemplate,
            TEMPLATE_SORT,
            default=("cluster_id", "namespace", "name"),
            constant={"cluster": self.one_cluster},
        )
        ctx.update(self.paginate(sort.apply(templates), 100))
        for t in ctx["page_obj"].object_list:
            t.request_names = [
                r.get("name", "")
                for r in (((t.raw.get("spec") or {}).get("spec") or {}).get("devices") or {}).get("requests") or []
            ]
        ctx.update(
            sorting=sort,
            filter_errors=filterset.errors,
            filters={
                "namespace": list_namespace(self),
                **{k: self.request.GET.get(k, "") for k in ("device_class", "name")},
            },
        )
        return ctx


class ClaimListView(DashboardView):
    """ResourceClaims in the user's namespaces, filtered like GET /api/v1/claims/ (the same FilterSet):
    namespace (the global selector's by default), state, node, device class, name or owner pod."""

    template_name = "claims/claim_list.html"
    regions = {"claims": "claims/_claim_table.html"}
    live_kinds = ("ResourceClaim", "Finding")  # Finding: the stuck state and filter
    nav = "claims"
    filter_aliases = {"class": "device_class"}  # the page's earlier name for the device class filter

    def live_scope(self):
        scope = super().live_scope()
        namespace = list_namespace(self)
        if namespace and roles.can_see_namespace(self.request.user, namespace):  # the socket refuses others' namespaces
            scope["namespace"] = namespace
        return scope

    def get_context_data(self, **kwargs):
        from .filtersets import ResourceClaimFilterSet

        ctx = super().get_context_data(**kwargs)
        get = self.request.GET
        visible = roles.scope_queryset(self.in_cluster(ResourceClaim.objects.select_related(None)), self.request.user)
        qs, filterset = self.filter_with(ResourceClaimFilterSet, visible, namespace=self.namespace)
        qs = claims_with_flags(qs)
        f = {k: get.get(k, "").strip() for k in ("state", "node", "device_class", "q")}
        f["device_class"] = f["device_class"] or get.get("class", "").strip()
        f["namespace"] = list_namespace(self)
        sort = tables.sorting(
            self.request,
            ResourceClaim,
            CLAIM_SORT,
            default=("cluster_id", "namespace", "name"),
            constant={"cluster": self.one_cluster},
        )
        qs = sort.apply(qs).only(
            "id",
            "cluster_id",
            "namespace",
            "name",
            "state",
            "node_name",
            "device_classes",
            "creation_timestamp",
            "deletion_timestamp",
            "owner_pod_name",
            "allocated",
        )
        ctx.update(self.paginate(qs, 100))
        names = {c.id: c.name for c in Cluster.objects.all()}
        for c in ctx["page_obj"].object_list:
            c.cluster_name = names.get(c.cluster_id)
        namespaces = (
            roles.scope_queryset(self.in_cluster(ResourceClaim.objects.all()), self.request.user)
            .values_list("namespace", flat=True)
            .distinct()
            .order_by("namespace")
        )
        ctx.update(
            filters=f,
            filter_errors=filterset.errors,
            states=CLAIM_STATES,
            namespaces=list(namespaces),
            total=ctx["page_obj"].paginator.count,
            sorting=sort,
        )
        return ctx


class ClaimDetailView(DashboardView):
    template_name = "claims/claim_detail.html"
    regions = {"claim": "claims/_claim_body.html"}
    nav = "claims"
    panels = "claim"

    def look_up(self, request, **kwargs):
        if not roles.can_see_namespace(request.user, kwargs["namespace"]):
            raise Http404("No such claim.")  # not 403, and before the lookup: do not confirm it exists
        self.claim = get_object_or_404(
            ResourceClaim, cluster__name=kwargs["cluster"], namespace=kwargs["namespace"], name=kwargs["name"]
        )

    def live_scope(self):
        return {
            "cluster": self.claim.cluster_id,
            "namespace": self.claim.namespace,
            "kind": ["ResourceClaim", "Pod", "Finding", "Event"],
        }

    def findings_with_actions(self):
        """The claim's open findings, each with its remedy and whether this user may run it (or why not)."""
        from .finding_scope import show_findings
        from .stuck import RULE_TITLES

        findings = list(
            Finding.objects.active()
            .filter(cluster_id=self.claim.cluster_id, claim_uid=self.claim.uid)
            .order_by("first_seen", "id")
        )
        may_operate = roles.can_operate(self.request.user, self.claim.namespace)
        show_findings(findings, self.request.user)
        for f in findings:
            f.rule_title = RULE_TITLES.get(f.rule, f.rule)
            f.action_title = ACTION_TITLES.get(f.remedy, f.remedy)
            f.can_release = bool(f.remedy) and may_operate
            explanation = (f.shown_evidence or {}).get("explanation") or {}
            f.answer = headline_text(explanation.get("verdict")) if not f.remedy else []
            f.remedies = (
                present(
                    explanation.get("remedies"),
                    self.claim.cluster,
                    lambda ns: roles.can_operate(self.request.user, ns),
                )
                if not f.remedy
                else []
            )
            f.remedies_searched = bool(explanation.get("verdict")) and not f.remedy
            if not f.remedy:
                # The engine's answer and its verified remedies say what to do; without them, the evidence.
                f.release_blocked = (
                    ""
                    if f.remedies_searched
                    else gettext("No safe automatic remedy: fix the cause (see the evidence).")
                )
            elif not may_operate:
                f.release_blocked = gettext(
                    "Releasing needs the operator role in namespace %(namespace)s; you are %(role)s."
                ) % {
                    "namespace": self.claim.namespace,
                    "role": roles.role_of(self.request.user) or gettext("without a role"),
                }
            else:
                f.release_blocked = ""
        return findings

    def driver_logs(self, consumers):
        """When the claim is allocated but not prepared (a not-prepared finding, or a bound pod still
        Pending on it), the driver pods' log tail on that node; read on the full page load only (a live
        region refresh does not go to the API server)."""
        from .stuck import NOT_PREPARED

        claim = self.claim
        if self.request.GET.get("fragment") or not claim.allocated:
            return {}
        nodes = {
            c.pod.node_name for c in consumers if c.pod is not None and c.pod.node_name and c.pod.phase == "Pending"
        }
        if (
            Finding.objects.active()
            .filter(cluster_id=claim.cluster_id, claim_uid=claim.uid, rule=NOT_PREPARED)
            .exists()
            and claim.node_name
        ):
            nodes.add(claim.node_name)
        if not nodes:
            return {}
        from . import driverlogs

        drivers = {r.driver for r in claim.results.all()}
        scope = roles.driver_namespaces(self.request.user)
        out = driverlogs.page_context(claim.cluster, sorted(nodes)[0], drivers, namespaces=scope)
        for node in sorted(nodes)[1:]:
            out["driver_logs"] += driverlogs.node_driver_logs(claim.cluster, node, drivers, namespaces=scope)
        return out

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        claim = self.claim
        results = list(claim.results.all())
        # Still published? inventory says (mirror/published.py); a gone device is shown without a link.
        present = published.devices(claim.cluster_id, pools={r.pool for r in results})
        for r in results:
            r.device_exists = (r.driver, r.pool, r.device) in present
        consumers = list(claim.consumers.all())
        pods = {p.uid: p for p in Pod.objects.filter(cluster_id=claim.cluster_id, uid__in=[c.uid for c in consumers])}
        for c in consumers:
            c.pod = pods.get(c.uid)
        # Pods that reference the claim but are not (yet) in reservedFor: the usual "why Pending" place.
        waiting = (
            Pod.objects.filter(
                cluster_id=claim.cluster_id, namespace=claim.namespace, claim_refs__claim_name=claim.name
            )
            .exclude(uid__in=[c.uid for c in consumers])
            .distinct()
        )
        ctx.update(
            claim=claim,
            requests=(claim.spec.get("devices") or {}).get("requests") or [],
            constraints=(claim.spec.get("devices") or {}).get("constraints") or [],
            results=results,
            consumers=consumers,
            waiting_pods=waiting,
            timeline=ClaimStateChange.objects.filter(
                cluster_id=claim.cluster_id, namespace=claim.namespace, name=claim.name
            ).order_by("at", "id"),
            findings=self.findings_with_actions(),
            finding_history=Finding.objects.filter(
                cluster_id=claim.cluster_id, claim_uid=claim.uid, cleared_at__isnull=False
            ).count(),
            conditions=claim.status.get("conditions") or [],
            device_statuses=devicestatus_pages.claim_statuses(claim),
            device_health=devicestatus_pages.claim_health(claim),
            **self.driver_logs(consumers),
            owner_pod_exists=bool(claim.owner_pod_name)
            and Pod.objects.filter(
                cluster_id=claim.cluster_id, namespace=claim.namespace, name=claim.owner_pod_name
            ).exists(),
            **object_page(
                claim.cluster,
                "ResourceClaim",
                claim.raw,
                claim.name,
                claim.namespace,
                claim.uid,
                crumbs=[
                    crumb(_("Claims"), "claims:claim-list", query=f"cluster={claim.cluster.name}"),
                    crumb(
                        claim.namespace,
                        "claims:claim-list",
                        query=f"cluster={claim.cluster.name}&namespace={claim.namespace}",
                    ),
                    crumb(claim.name),
                ],
            ),
        )
        return ctx


class PodListView(DashboardView):
    """Pods that use claims, filtered like GET /api/v1/pods/ (the same FilterSet): namespace (the
    global selector's by default), phase, node, name."""

    template_name = "claims/pod_list.html"
    regions = {"pods": "claims/_pod_table.html"}
    live_kinds = ("Pod", "ResourceClaim")
    nav = "pods"

    def get_context_data(self, **kwargs):
        from .filtersets import PodFilterSet

        ctx = super().get_context_data(**kwargs)
        get = self.request.GET
        # EXISTS, not a join + DISTINCT: the pods list then walks the (cluster, namespace, name) index
        # for its page instead of de-duplicating every pod with a claim.
        using_claims = roles.scope_queryset(self.in_cluster(Pod.objects.all()), self.request.user).filter(
            Exists(PodClaimRef.objects.filter(pod_id=OuterRef("pk")))
        )
        qs, filterset = self.filter_with(PodFilterSet, using_claims, namespace=self.namespace)
        f = {k: get.get(k, "").strip() for k in ("phase", "node", "q")}
        f["namespace"] = list_namespace(self)
        sort = tables.sorting(
            self.request,
            Pod,
            POD_SORT,
            default=("cluster_id", "namespace", "name"),
            constant={"cluster": self.one_cluster},
        )
        qs = sort.apply(qs).defer("raw")
        ctx.update(self.paginate(qs, 100))
        page = list(ctx["page_obj"].object_list)
        refs = {}
        for ref in PodClaimRef.objects.filter(pod__in=page).order_by("pod_id", "id"):
            refs.setdefault(ref.pod_id, []).append(ref)
        keys = {(p.cluster_id, p.namespace, r.claim_name) for p in page for r in refs.get(p.id, ()) if r.claim_name}
        claim_states = (
            {
                (c, ns, n): s
                for c, ns, n, s in ResourceClaim.objects.filter(claim_keys_q(keys)).values_list(
                    "cluster_id", "namespace", "name", "state"
                )
            }
            if keys
            else {}
        )
        names = {c.id: c.name for c in Cluster.objects.all()}
        for p in page:
            p.cluster_name = names.get(p.cluster_id)
            p.refs = refs.get(p.id, [])
            for r in p.refs:
                r.claim_state = claim_states.get((p.cluster_id, p.namespace, r.claim_name), "")
        ctx.update(
            pods=page,
            filters=f,
            filter_errors=filterset.errors,
            phases=["Pending", "Running", "Succeeded", "Failed", "Unknown"],
            sorting=sort,
        )
        return ctx
