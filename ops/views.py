"""Operations pages: stuck claims (with single and bulk release, dry run first, then a confirmation),
and 'why is my Pod Pending?'."""

import json

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Case, Exists, F, IntegerField, OuterRef, TextField, Value, When
from django.db.models.functions import Concat, NullIf
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.utils.translation import gettext

from claims.finding_scope import show_findings
from claims.models import ACTION_TITLES, OUTCOME_TITLES, AuditEntry, Finding, Pod, PodClaimRef
from claims.release.actions import release_finding
from claims.stuck import RULE_TITLES
from mirror import roles, tables
from mirror.models import Cluster
from mirror.views import DashboardView

from .pending import PodNotFound, explain_pod

MAX_BULK = 100
SEVERITY_RANK = {"info": 1, "warning": 2, "critical": 3}
# Sortable columns of the "Why Pending?" list (mirror/tables.py).
PENDING_SORT = {
    "cluster": "cluster__name",
    "namespace": "namespace",
    "name": "name",
    "created": "creation_timestamp",
    "reason": NullIf("scheduled_reason", Value("")),
}  # no PodScheduled reason yet: last


def finding_sort_columns():
    """Sortable columns of the stuck-claims list, in SQL and by what the rows show: severity by rank
    (critical last ascending, first descending), rule and remedy by their titles in the page's
    language, the claim as "namespace/name"; findings without a claim or a remedy sort last."""

    def titles(field, mapping, default):
        return Case(
            *[When(**{field: key}, then=Value(str(title))) for key, title in mapping.items()],
            default=default,
            output_field=TextField(),
        )

    return {
        "severity": Case(
            *[When(severity=k, then=Value(v)) for k, v in SEVERITY_RANK.items()],
            default=Value(0),
            output_field=IntegerField(),
        ),
        "rule": titles("rule", RULE_TITLES, F("rule")),
        "cluster": "cluster__name",
        "claim": Case(
            When(claim_name="", then=Value(None)),
            default=Concat("namespace", Value("/"), "claim_name"),
            output_field=TextField(),
        ),
        "first_seen": "first_seen",
        "remedy": titles("remedy", ACTION_TITLES, Value(None)),
    }


class StuckClaimsView(DashboardView):
    """Open findings (or their history), filterable; rows with a remedy can be selected for release."""

    template_name = "claims/stuck.html"
    regions = {"findings": "claims/_findings_table.html"}
    live_kinds = ("ResourceClaim", "Pod", "Node", "ResourceSlice", "Finding")
    nav = "stuck"
    filter_aliases = {"claim_name": "claim"}  # the page's name for the FilterSet's `claim`

    def get_context_data(self, **kwargs):
        from claims.filtersets import FindingFilterSet

        ctx = super().get_context_data(**kwargs)
        get = self.request.GET
        visible = roles.scope_queryset(self.in_cluster(Finding.objects.select_related("cluster")), self.request.user)
        history = get.get("history") == "1"  # the page's checkbox: the API's active=all
        qs, filterset = self.filter_with(FindingFilterSet, visible, active="all" if history else "1")
        filters = {k: get.get(k, "").strip() for k in ("rule", "severity", "namespace", "claim_name")}
        sort = tables.sorting(
            self.request,
            Finding,
            finding_sort_columns(),
            default=("cleared_at", "-first_seen", "-id"),
            constant={"cluster": self.one_cluster},
        )
        ctx.update(self.paginate(sort.apply(qs), 100))
        show_findings(ctx["page_obj"].object_list, self.request.user)
        for f in ctx["page_obj"].object_list:
            f.rule_title = RULE_TITLES.get(f.rule, f.rule)
            f.action_title = ACTION_TITLES.get(f.remedy, "")
            f.can_release = f.remedy and f.cleared_at is None and roles.can_operate(self.request.user, f.namespace)
        ctx.update(
            filters=filters,
            filter_errors=filterset.errors,
            history=history,
            rules=RULE_TITLES,
            severities=Finding.Severity.choices,
            sorting=sort,
            recent_audit=roles.scope_queryset(AuditEntry.objects.all(), self.request.user)[:10],
        )
        return ctx


class ReleaseFindingsView(DashboardView):
    """POST ids + step=dry-run: show each finding's exact request, warnings and refusals, with a confirm form.
    POST ids + step=release (+ the resourceVersions the dry run showed): run them and show the outcomes."""

    template_name = "claims/stuck_release.html"
    nav = "stuck"
    live_kinds = ("Finding",)  # the nav's stuck badge follows the detector while the operator decides
    http_method_names = ["post"]

    def post(self, request, *args, **kwargs):
        if not roles.has_role(request.user, roles.OPERATOR):
            # Still audited, so the attempt is on record like any other refused release.
            ids = self._ids(request)
            for finding in self._findings(ids):
                release_finding(request.user, finding, dry_run=True)
            raise PermissionDenied("Release actions need the operator role.")
        ids = self._ids(request)
        step = request.POST.get("step")
        if step not in ("dry-run", "release"):
            raise Http404("step must be dry-run or release")
        findings = self._findings(ids)
        if not findings:
            messages.error(request, gettext("Select at least one finding with a remedy."))
            return redirect("ops:stuck")
        results = []
        show_findings(findings, request.user)
        for finding in findings:
            finding.rule_title = RULE_TITLES.get(finding.rule, finding.rule)
            rv = request.POST.get(f"rv-{finding.id}", "")
            # The confirm form carries the resourceVersion each dry run showed: a release is of that version only.
            outcome = release_finding(
                request.user,
                finding,
                dry_run=step == "dry-run",
                expected_resource_version=rv,
                require_resource_version=True,
            )
            plan = outcome.plan.as_dict(translate=True) if outcome.plan else None  # its texts in the reader's language
            results.append(
                {
                    "finding": finding,
                    "outcome": outcome,
                    "plan": plan,
                    "request_json": json.dumps(plan["request"], indent=2) if plan and plan["request"] else "",
                }
            )
        ctx = self.get_context_data(
            results=results, step=step, confirmable=[r for r in results if r["outcome"].outcome == "dry-run"]
        )
        return TemplateResponse(request, self.template_name, ctx)

    @staticmethod
    def _ids(request):
        try:
            ids = [int(i) for i in request.POST.getlist("ids")]
        except ValueError:
            raise Http404("finding ids must be numbers") from None
        return ids[:MAX_BULK]

    def _findings(self, ids):
        qs = roles.scope_queryset(Finding.objects.select_related("cluster").filter(id__in=ids), self.request.user)
        return list(qs.order_by("id"))


class PendingPodView(DashboardView):
    """A form (cluster, namespace, pod), or the checklist of one pod when all three are given."""

    template_name = "claims/pending.html"
    nav = "pending"

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        get = self.request.GET
        namespace, name = kwargs.get("namespace") or get.get("namespace", ""), kwargs.get("name") or get.get("name", "")
        cluster = self.cluster
        if kwargs.get("cluster_name"):
            cluster = get_object_or_404(Cluster, name=kwargs["cluster_name"])
        with_claims = Exists(
            PodClaimRef.objects.filter(pod_id=OuterRef("pk"))
        )  # a semi-join, not NOT EXISTS over a LEFT JOIN
        pending = roles.scope_queryset(
            self.in_cluster(Pod.objects.filter(with_claims, phase="Pending")), self.request.user
        )
        sort = tables.sorting(
            self.request,
            Pod,
            PENDING_SORT,
            default=("cluster_id", "namespace", "name"),
            constant={"cluster": self.one_cluster},
        )
        ctx.update(
            self.paginate(
                sort.apply(pending.select_related("cluster")).only(
                    "cluster__name", "namespace", "name", "creation_timestamp", "scheduled_reason", "scheduled_message"
                ),
                50,
            )
        )
        ctx.update(form={"namespace": namespace, "name": name}, target_cluster=cluster, sorting=sort)
        if namespace and name:
            if cluster is None:
                ctx["error"] = "Pick a cluster first."
            elif not roles.can_see_namespace(self.request.user, namespace):
                ctx["error"] = f"Pod {namespace}/{name} not found."
            else:
                try:
                    ctx["report"] = explain_pod(
                        cluster,
                        namespace,
                        name,
                        visible_namespaces=roles.visible_namespaces(self.request.user),
                        user_key=self.request.user.pk,
                        driver_namespaces=roles.driver_namespaces(self.request.user),
                        may_release=lambda ns: roles.can_operate(self.request.user, ns),
                    )
                except PodNotFound as exc:
                    ctx["error"] = str(exc)
        return ctx


# The audit log's sortable columns (header links); unsorted, newest first.
AUDIT_SORT_COLUMNS = {
    "at": "at",
    "username": "username",
    "cluster": "cluster_name",
    "claim": "claim_name",
    "action": "action",
    "outcome": "outcome",
}


class AuditLogView(DashboardView):
    """Every attempted write to a cluster (release actions, their dry runs and refusals), newest first,
    filtered like GET /api/v1/audit/ (the same FilterSet): user, cluster, action, outcome, namespace, claim."""

    template_name = "claims/audit.html"
    nav = "audit"

    def get_context_data(self, **kwargs):
        from claims.filtersets import AuditEntryFilterSet

        ctx = super().get_context_data(**kwargs)
        visible = roles.scope_queryset(self.in_cluster(AuditEntry.objects.all()), self.request.user)
        params = self.request.GET.copy()
        for key in ("page", "fragment", "cluster", "ordering"):  # ?cluster= is the page's cluster (in_cluster above)
            params.pop(key, None)
        filterset = AuditEntryFilterSet(params, queryset=visible)
        entries = filterset.qs if filterset.is_valid() else visible.none()
        sort = tables.sorting(self.request, AuditEntry, AUDIT_SORT_COLUMNS, default=("-at",))
        entries = sort.apply(entries, tiebreak=("-id",)) if sort.order else entries
        ctx.update(self.paginate(entries, 50))
        for entry in ctx["page_obj"].object_list:
            entry.request_json = json.dumps(entry.request, indent=2) if entry.request else ""
            entry.response_json = json.dumps(entry.response, indent=2) if entry.response else ""
        choices = {
            field: sorted(v for v in visible.values_list(field, flat=True).distinct() if v)
            for field in ("username", "action", "outcome")
        }
        ctx.update(
            filters={k: self.request.GET.get(k, "") for k in ("username", "action", "outcome", "namespace", "claim")},
            filter_errors=filterset.errors,
            choices=choices,
            action_titles=ACTION_TITLES,
            outcome_titles=OUTCOME_TITLES,
            sorting=sort,
            total=ctx["page_obj"].paginator.count,
        )
        return ctx
