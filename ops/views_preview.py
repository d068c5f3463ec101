"""The allocation preview page: where would a claim land? It shows the engine's answer (claims.preview)
with each fitting node's devices in their fleet states (inventory), so it lives above both; its URL
keeps the name claims:preview (ops/urls.py)."""

from urllib.parse import urlencode

import yaml
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Q
from django.utils.translation import gettext

from claims.answers import headline_text, present
from claims.models import Pod, ResourceClaim
from claims.preview_scope import OutOfScope
from claims.preview_service import dispatch
from mirror import roles
from mirror.models import Cluster
from mirror.states import DISPLAY_STATES
from mirror.views import DashboardView

from . import preview_page


def yaml_namespace(text):
    """metadata.namespace of the first object in pasted YAML, or "" (unreadable YAML is the preview's to report)."""
    if not text or "namespace" not in text:
        return ""
    try:
        for doc in yaml.safe_load_all(text):
            meta = doc.get("metadata") if isinstance(doc, dict) else None
            if isinstance(meta, dict) and isinstance(meta.get("namespace"), str):
                return meta["namespace"].strip()
            return ""
    except yaml.YAMLError:
        return ""
    return ""


class PreviewView(DashboardView):
    """Where would a claim land? Paste YAML (claim, template or pod) or pick a pending claim; runs
    claims.preview.run_preview and shows ops.preview_page.PreviewReport.

    YAML previews are POSTed (the text is too long for a URL); a pending claim is previewed with a
    plain GET link (`?claim=ns/name`), so claim pages and the pending list can link to it. Paging a
    list of nodes re-runs the preview (`show=<list>:<page>`): the engine is warm and fast, and no
    result is kept between requests.
    """

    template_name = "claims/preview.html"
    nav = "preview"
    pending_per_page = 25

    @classmethod
    def selected_cluster(cls, request):
        """The preview runs against one cluster: with "All clusters" selected and only one cluster
        there, that one (without changing the selection the other pages use)."""
        cluster = super().selected_cluster(request)
        if cluster is None:
            only = list(Cluster.objects.all()[:2])
            cluster = only[0] if len(only) == 1 else None
        return cluster

    def get(self, request, *args, **kwargs):
        if request.GET.get("claim"):
            return self.run(request, request.GET, **kwargs)
        return super().get(request, *args, **kwargs)

    def post(self, request, *args, **kwargs):
        if not roles.can_operate(request.user):
            raise PermissionDenied("Running a preview needs the operator role.")
        return self.run(request, request.POST, **kwargs)

    def run(self, request, params, **kwargs):
        ctx = self.get_context_data(**kwargs)
        ref = params.get("claim", "").strip()
        yaml_text = "" if ref else params.get("yaml", "")
        namespace = params.get("namespace", "").strip() or "default"
        # A GET link runs with headroom unless it says headroom=0; the form sends the checkbox.
        with_headroom = params.get("headroom", "1" if request.method == "GET" else "") in ("1", "on", "true")
        ctx.update(
            picked=ref,
            yaml_text=yaml_text,
            # The field shows the namespace the YAML names (it only fills in for objects without one).
            namespace=yaml_namespace(yaml_text) or namespace,
            with_headroom=with_headroom,
            pod_tolerations=params.get("tolerations", ""),
            pod_node_selector=params.get("node_selector", ""),
            skip_node_filters=params.get("skip_node_filters", "") in ("1", "on", "true"),
        )
        if not roles.can_operate(request.user):
            return self.render_to_response(ctx)  # the page explains the operator role; nothing runs
        if self.cluster is None:
            ctx["error"] = gettext("Pick a cluster first (the preview runs against one cluster's inventory).")
            return self.render_to_response(ctx)
        claim = None
        if ref:
            ns, _, name = ref.partition("/")
            if not roles.can_operate(request.user, ns):  # before the lookup: the same answer whether it exists
                return self.out_of_scope(ctx, OutOfScope(ns))
            claim = ResourceClaim.objects.filter(cluster=self.cluster, namespace=ns, name=name).first()
            if claim is None:
                ctx["error"] = gettext("No claim %(claim)s in cluster %(cluster)s.") % {
                    "claim": repr(ref),
                    "cluster": self.cluster.name,
                }
                return self.render_to_response(ctx)
            namespace = ctx["namespace"] = ns
            # The claim as YAML in the box, so it can be tweaked and run again as a paste.
            ctx["yaml_text"] = yaml.safe_dump(
                {
                    "apiVersion": claim.raw.get("apiVersion", "resource.k8s.io/v1"),
                    "kind": "ResourceClaim",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": claim.raw.get("spec") or {},
                },
                sort_keys=False,
                width=10000,
            )
        if not roles.can_operate(request.user, namespace):
            return self.out_of_scope(ctx, OutOfScope(namespace))
        if claim is None and not yaml_text.strip():
            ctx["error"] = gettext(
                "Paste a ResourceClaim, ResourceClaimTemplate or Pod (or a bare claim spec) as YAML, or pick a pending claim."
            )
            return self.render_to_response(ctx)
        try:
            pod_params = preview_page.would_be_pod_params(params)
            if (
                claim is not None
                and claim.owner_pod_name
                and pod_params["node_filters"]
                and not (pod_params["tolerations"] or pod_params["node_selector"])
            ):
                owner = Pod.objects.filter(
                    cluster=self.cluster, namespace=claim.namespace, name=claim.owner_pod_name
                ).first()
                pod_params["pod"] = (
                    owner.raw if owner else None
                )  # the pending pod's own tolerations, selector, requests
            answer = dispatch.submit(
                self.cluster,
                user_key=request.user.pk,
                client_gone=getattr(request, "client_gone", None),
                yaml_text=None if claim else yaml_text,
                claim=claim,
                namespace=namespace,
                with_headroom=with_headroom,
                with_remedies=True,  # searched only when no node fits (claims.preview._add_remedies)
                reason_codes=True,
                visible_namespaces=roles.visible_namespaces(self.request.user),
                **pod_params,
            )
            report, outcome = preview_page.PreviewReport.read(
                answer,
                cluster=self.cluster,
                yaml_text=yaml_text or None,
                claim_spec=claim.raw.get("spec") if claim else None,
                show=params.get("show", ""),
            )
            del answer
        except OutOfScope as exc:  # a namespace the YAML names (checked before its claims are looked up)
            return self.out_of_scope(ctx, exc)
        except dispatch.NOT_ANSWERED as exc:  # admission control, a lost worker: said with the API's status
            return dispatch.not_answered_page(self.render_to_response, ctx, exc)
        except ValueError as exc:  # bad YAML / bad claim: the engine names what is wrong (and where)
            ctx.update(error=str(exc), error_position=preview_page.yaml_error_position(str(exc)))
            return self.render_to_response(ctx)
        fits = report.fits
        preview_page.attach_device_strips(self.cluster, fits.rows, request.user)
        groups = report.groups
        verdict = outcome.get("verdict") or {}
        ctx.update(
            answer_headline=headline_text(verdict) if verdict.get("requests") else [],
            remedies=present(outcome.get("remedies"), self.cluster, lambda ns: roles.can_operate(request.user, ns)),
            remedies_searched=bool(verdict.get("requests")) and not verdict.get("fits"),
            report=report,
            outcome=outcome,
            fits=fits,
            groups=groups,
            headroom=report.headroom,
            claim=claim,
            misfit_count=sum(g.total for g in groups),
            group_page_size=preview_page.NODES_PER_GROUP_PAGE,
            fit_legend=DISPLAY_STATES,
            rerun_query=urlencode(
                {
                    "cluster": self.cluster.name,
                    "claim": ref,
                    "headroom": "1" if with_headroom else "0",
                    **{k: params[k] for k in ("tolerations", "node_selector", "skip_node_filters") if params.get(k)},
                }
            ),
        )
        return self.render_to_response(ctx)

    def out_of_scope(self, ctx, exc):
        """The page with the refusal (403): nothing ran, and nothing says whether the object exists."""
        ctx.update(error=str(exc), yaml_text="" if ctx.get("picked") else ctx.get("yaml_text", ""))
        return self.render_to_response(ctx, status=403)

    def pending_claims(self):
        """Pending claims of the selected cluster the user may see, newest first, filtered by `pq`."""
        qs = roles.scope_queryset(ResourceClaim.objects.pending(), self.request.user)
        if self.cluster is not None:
            qs = qs.filter(cluster=self.cluster)
        q = self.request.GET.get("pq", "").strip()
        if q:
            qs = qs.filter(Q(name__icontains=q) | Q(namespace__icontains=q) | Q(owner_pod_name__icontains=q))
        qs = qs.newest_first().only(
            "cluster_id", "namespace", "name", "device_classes", "creation_timestamp", "owner_pod_name"
        )
        paginator = Paginator(qs, self.pending_per_page)
        return paginator.get_page(self.request.GET.get("ppage")), q

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        page, q = self.pending_claims()
        query = self.request.GET.copy()
        for key in ("ppage", "claim", "show"):
            query.pop(key, None)
        ctx.setdefault("picked", "")
        ctx.setdefault("yaml_text", "")
        ctx.setdefault("namespace", "default")
        ctx.setdefault("with_headroom", True)
        ctx.update(pending=page, pending_query=query.urlencode(), pq=q, samples=preview_page.samples(self.cluster))
        return ctx
