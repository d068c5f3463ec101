"""Object pages of the workload kinds: Pods and ResourceClaimTemplates (claims are in views.py).
Namespaced: a user outside the namespace gets a 404 before any lookup, as on the claim page."""

from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils.translation import gettext as _

from mirror import published, roles
from mirror.objectpage import crumb, object_page
from mirror.views import DashboardView

from . import devicestatus_pages, driverlogs
from .models import AllocationResult, ClaimConsumer, Pod, PodClaimRef, ResourceClaim, ResourceClaimTemplate


def namespace_crumbs(list_url_name, list_label, cluster_name, namespace, name):
    return [
        crumb(list_label, list_url_name, query=f"cluster={cluster_name}"),
        crumb(namespace, list_url_name, query=f"cluster={cluster_name}&namespace={namespace}"),
        crumb(name),
    ]


class PodDetailView(DashboardView):
    template_name = "claims/pod_detail.html"
    regions = {"pod": "claims/_pod_body.html"}
    nav = "pods"
    panels = "pod"

    def look_up(self, request, **kwargs):
        if not roles.can_see_namespace(request.user, kwargs["namespace"]):
            raise Http404("No such pod.")  # before the lookup: do not confirm it exists
        self.pod = get_object_or_404(
            Pod.objects.select_related("cluster"),
            cluster__name=kwargs["cluster"],
            namespace=kwargs["namespace"],
            name=kwargs["name"],
        )

    def live_scope(self):
        return {
            "cluster": self.pod.cluster_id,
            "namespace": self.pod.namespace,
            "kind": ["Pod", "ResourceClaim", "Event"],
        }

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        pod = self.pod
        refs = list(PodClaimRef.objects.filter(pod=pod).order_by("id"))
        claims = {
            c.name: c
            for c in ResourceClaim.objects.filter(
                cluster_id=pod.cluster_id,
                namespace=pod.namespace,
                name__in={r.claim_name for r in refs if r.claim_name},
            )
        }
        templates = set(
            ResourceClaimTemplate.objects.filter(
                cluster_id=pod.cluster_id,
                namespace=pod.namespace,
                name__in={r.template_name for r in refs if r.template_name},
            ).values_list("name", flat=True)
        )
        for r in refs:
            r.claim = claims.get(r.claim_name)
            r.template_exists = r.template_name in templates
        results = list(
            AllocationResult.objects.filter(claim__in=list(claims.values()))
            .select_related("claim")
            .order_by("claim__name", "id")
        )
        # Still published? inventory says (mirror/published.py); a gone device is shown without a link.
        present = published.devices(pod.cluster_id, pools={r.pool for r in results})
        for r in results:
            r.device_exists = (r.driver, r.pool, r.device) in present
        status = pod.status
        container_status = {
            c.get("name"): c
            for c in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])
        }
        containers = [
            {
                "name": c.get("name"),
                "image": c.get("image"),
                "init": init,
                "status": container_status.get(c.get("name")) or {},
                "claims": [x.get("name") for x in (c.get("resources") or {}).get("claims") or []],
            }
            for init, group in ((True, pod.spec.get("initContainers") or []), (False, pod.spec.get("containers") or []))
            for c in group
        ]
        # HAMi's assignment: its container index counts init containers first, as `containers` does.
        hami_devices = [
            dict(d, container_name=containers[d["container"]]["name"] if 0 <= d["container"] < len(containers) else "")
            for d in (pod.hami or {}).get("devices") or ()
        ]
        reserved_in = (
            set(
                ClaimConsumer.objects.filter(claim__in=list(claims.values()), uid=pod.uid).values_list(
                    "claim__name", flat=True
                )
            )
            if pod.uid
            else set()
        )
        ctx.update(
            pod=pod,
            refs=refs,
            results=results,
            containers=containers,
            conditions=status.get("conditions") or [],
            reserved_in=reserved_in,
            hami_devices=hami_devices,
            resource_health=devicestatus_pages.pod_health(pod),
            # A DRA driver pod: its log tail (full page loads only; a live region refresh does not ask).
            **(driverlogs.page_context(pod.cluster, pod=pod) if not self.request.GET.get("fragment") else {}),
            **object_page(
                pod.cluster,
                "Pod",
                pod.raw,
                pod.name,
                pod.namespace,
                pod.uid,
                crumbs=namespace_crumbs("claims:pod-list", _("Pods"), pod.cluster.name, pod.namespace, pod.name),
            ),
        )
        return ctx


class TemplateDetailView(DashboardView):
    template_name = "claims/template_detail.html"
    nav = "claims"

    def look_up(self, request, **kwargs):
        if not roles.can_see_namespace(request.user, kwargs["namespace"]):
            raise Http404("No such template.")
        self.template = get_object_or_404(
            ResourceClaimTemplate.objects.select_related("cluster"),
            cluster__name=kwargs["cluster"],
            namespace=kwargs["namespace"],
            name=kwargs["name"],
        )

    def live_scope(self):
        return {
            "cluster": self.template.cluster_id,
            "namespace": self.template.namespace,
            "kind": ["ResourceClaimTemplate", "Pod", "ResourceClaim", "Event"],
        }

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        t = self.template
        # Pods naming the template, and the claims generated for them (the pod's status names each).
        refs = list(
            PodClaimRef.objects.filter(cluster_id=t.cluster_id, namespace=t.namespace, template_name=t.name)
            .select_related("pod")
            .order_by("pod__name", "id")[:200]
        )
        states = dict(
            ResourceClaim.objects.filter(
                cluster_id=t.cluster_id, namespace=t.namespace, name__in={r.claim_name for r in refs if r.claim_name}
            ).values_list("name", "state")
        )
        for r in refs:
            r.claim_state = states.get(r.claim_name, "")
        spec = t.spec.get("spec") or {}
        ctx.update(
            template=t,
            refs=refs,
            requests=(spec.get("devices") or {}).get("requests") or [],
            **object_page(
                t.cluster,
                "ResourceClaimTemplate",
                t.raw,
                t.name,
                t.namespace,
                t.uid,
                crumbs=namespace_crumbs("claims:claim-list", _("Claims"), t.cluster.name, t.namespace, t.name),
            ),
        )
        return ctx
