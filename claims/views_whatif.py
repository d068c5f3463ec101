"""The what-if page: hypothetical changes to a copy of the inventory, and what they do to the pending
pods and claims (claims/whatif.py runs it on a preview worker; nothing is written to the cluster).

A scenario is run by GET, its changes in the query string (`c` per change, `s` per headroom shape),
so its URL shares it; an operator may save it under a name (WhatIfScenario, only theirs)."""

from urllib.parse import urlencode

from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext

from dra import whatif as engine
from mirror import roles
from mirror.models import Cluster
from mirror.views import DashboardView

from .models import WhatIfScenario
from .models_whatif import scenario_query
from .preview_scope import OutOfScope
from .preview_service import dispatch
from .whatif import ScenarioInvalid, capacity_rows, check_scope, parse_scenario

# Verdicts in the order the page lists them: what changed first.
VERDICT_ORDER = (
    engine.NOW_SCHEDULABLE,
    engine.LOSES_PLACE,
    engine.STILL_BLOCKED,
    engine.STILL_SCHEDULABLE,
    engine.ERROR,
    engine.UNDECIDED,
)
ROWS_PER_VERDICT = 200


def verdict_titles():
    return {
        engine.NOW_SCHEDULABLE: gettext("Now schedulable"),
        engine.LOSES_PLACE: gettext("Would lose its place"),
        engine.STILL_BLOCKED: gettext("Still blocked"),
        engine.STILL_SCHEDULABLE: gettext("Schedulable before and after"),
        engine.ERROR: gettext("Cannot be placed (error)"),
        engine.UNDECIDED: gettext("Not checked (deadline)"),
    }


def lines_of(params):
    """Changes and shapes from a query: repeated `c` / `s`, or the form's textareas (one per line)."""
    changes = params.getlist("c") or (params.get("changes") or "").splitlines()
    shapes = params.getlist("s") or (params.get("shapes") or "").splitlines()
    return [c.strip() for c in changes if c.strip()], [s.strip() for s in shapes if s.strip()]


class WhatIfView(DashboardView):
    template_name = "claims/whatif.html"
    nav = "whatif"

    @classmethod
    def selected_cluster(cls, request):
        """As the preview page: the selected cluster, or the only one there is."""
        cluster = super().selected_cluster(request)
        if cluster is None:
            only = list(Cluster.objects.all()[:2])
            cluster = only[0] if len(only) == 1 else None
        return cluster

    def get(self, request, *args, **kwargs):
        ctx = self.get_context_data(**kwargs)
        changes, shapes = lines_of(request.GET)
        can_run = roles.can_operate(request.user)
        ctx.update(
            changes_text="\n".join(changes),
            shapes_text="\n".join(shapes),
            can_run=can_run,
            saved=WhatIfScenario.objects.owned_by(request.user).select_related("cluster") if can_run else [],
            syntax=engine.__doc__.split("\n\n")[1].strip("\n"),
        )
        if not changes or not can_run:
            return self.render_to_response(ctx)
        if self.cluster is None:
            ctx["error"] = gettext("Pick a cluster first (a what-if runs against one cluster's inventory).")
            return self.render_to_response(ctx, status=400)
        ctx["share_query"] = scenario_query(changes, shapes, self.cluster.name)
        visible = roles.visible_namespaces(request.user)
        try:
            parsed, _ = parse_scenario(changes, shapes)
            check_scope(parsed, visible)
            answer = dispatch.submit(
                self.cluster,
                user_key=request.user.pk,
                client_gone=getattr(request, "client_gone", None),
                what="whatif",
                changes=changes,
                shapes=shapes,
                visible_namespaces=visible,
            )
            result = dispatch.result_of(answer)
        except ScenarioInvalid as exc:
            ctx.update(error=str(exc), error_field=exc.field, error_index=exc.index)
            return self.render_to_response(ctx, status=400)
        except OutOfScope as exc:
            ctx["error"] = str(exc)
            return self.render_to_response(ctx, status=403)
        except dispatch.NOT_ANSWERED as exc:
            return dispatch.not_answered_page(self.render_to_response, ctx, exc)
        except ValueError as exc:  # the engine's other refusals (PreviewError): said as they are
            ctx["error"] = str(exc)
            return self.render_to_response(ctx, status=400)
        ctx.update(result=result, groups=self.groups(result), capacity_rows=capacity_rows(result.get("capacity")))
        return self.render_to_response(ctx)

    @staticmethod
    def groups(result):
        titles = verdict_titles()
        by_verdict = {v: [] for v in VERDICT_ORDER}
        for entry in result["workloads"]:
            by_verdict[entry["verdict"]].append(entry)
        return [
            {
                "verdict": v,
                "title": titles[v],
                "rows": rows[:ROWS_PER_VERDICT],
                "total": len(rows),
                "more": max(0, len(rows) - ROWS_PER_VERDICT),
            }
            for v, rows in by_verdict.items()
            if rows
        ]

    def post(self, request, *args, **kwargs):
        """Save the scenario under a name (or delete a saved one: `delete=<id>`)."""
        if not roles.can_operate(request.user):
            raise PermissionDenied("Saving a what-if scenario needs the operator role.")
        target = reverse("claims:whatif")
        if request.POST.get("delete"):
            WhatIfScenario.objects.owned_by(request.user).filter(pk=request.POST["delete"]).delete()
            return HttpResponseRedirect(target)
        changes, shapes = lines_of(request.POST)
        name = (request.POST.get("name") or "").strip()[:100]
        if self.cluster is None or not name or not changes:
            ctx = self.get_context_data(**kwargs)
            ctx.update(
                error=gettext("To save a scenario, pick a cluster, give it a name and at least one change."),
                changes_text="\n".join(changes),
                shapes_text="\n".join(shapes),
                can_run=True,
            )
            return self.render_to_response(ctx, status=400)
        try:
            parse_scenario(changes, shapes)
        except ScenarioInvalid as exc:
            ctx = self.get_context_data(**kwargs)
            ctx.update(
                error=str(exc),
                error_field=exc.field,
                error_index=exc.index,
                changes_text="\n".join(changes),
                shapes_text="\n".join(shapes),
                can_run=True,
            )
            return self.render_to_response(ctx, status=400)
        WhatIfScenario.objects.update_or_create(
            owner=request.user, cluster=self.cluster, name=name, defaults={"changes": changes, "shapes": shapes}
        )
        query = scenario_query(changes, shapes, self.cluster.name) + "&" + urlencode({"saved": name})
        return HttpResponseRedirect(f"{target}?{query}")
