"""What every dashboard page shares: login + role, the selected cluster, live regions, connection status."""

import json
from urllib.parse import urlencode

from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import BadRequest, PermissionDenied
from django.core.paginator import Paginator
from django.db import connection
from django.db.models import QuerySet
from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.formats import number_format
from django.utils.translation import gettext
from django.views.generic import TemplateView

from mirror import roles
from mirror.api.pagination import BoundedCountPaginator
from mirror.api.params import MAX_SEARCH_LENGTH, whole_number
from mirror.connection import connections
from mirror.models import Cluster

SESSION_CLUSTER = "gpudash.cluster"
SESSION_NAMESPACE = "gpudash.namespace"
# Regions of base.html every page can refresh: connection status, the navigation's stuck-claims badge.
SHARED_REGIONS = {"conn": "_connections.html", "navstuck": "_nav_stuck.html"}
MAX_PER_PAGE = 1000
# Query parameters of the page itself (paging, live fragments, the pickers, sorting), not a FilterSet's.
PAGE_PARAMS = ("page", "per_page", "fragment", "cluster", "ns", "ordering")


# What the apps above add to every page, registered from their AppConfig.ready() (claims/apps.py): the
# models whose namespaces the namespace picker offers, and the count behind the navigation's stuck
# badge, stuck_count(user, cluster or None). Unregistered: the picker offers the selected namespace
# only, and the badge counts nothing.
NAMESPACE_MODELS = []
_page_parts = {"stuck_count": None}
# Also: panels, {page: [panel(view, obj) -> HTML or ""]}, shown where a page of a lower floor calls
# page_panels (the device, node, claim and pod pages, the overview, the fleet map's legend), in the
# order of INSTALLED_APPS (claims' device status before health's notion); the one way an app adds a
# section to another app's page. And device_marks, [mark(devices)] setting extra keys on the fleet map's device dicts (health/pages.py).
PAGE_PANELS = {}
DEVICE_MARKS = []


def register_page_parts(namespace_models=(), stuck_count=None, panels=None, device_marks=()):
    NAMESPACE_MODELS.extend(m for m in namespace_models if m not in NAMESPACE_MODELS)
    if stuck_count is not None:
        _page_parts["stuck_count"] = stuck_count
    for page, panel in (panels or {}).items():
        if panel not in PAGE_PANELS.setdefault(page, []):
            PAGE_PANELS[page].append(panel)
    DEVICE_MARKS.extend(m for m in device_marks if m not in DEVICE_MARKS)


def page_panels(page, view, obj=None):
    """The HTML the apps above add to `page` for `obj` (a device, node, claim or pod), in order."""
    return [html for panel in PAGE_PANELS.get(page, ()) if (html := panel(view, obj))]


def mark_devices(devices):
    """Let the apps above mark fleet-map devices (dicts with cluster_id, driver, pool, name)."""
    for mark in DEVICE_MARKS:
        mark(devices)


def active_finding_count(user, cluster=None):
    """Open stuck-claim findings the user may see, in the selected cluster (what the Stuck page lists)."""
    count = _page_parts["stuck_count"]
    return 0 if count is None else count(user, cluster)


def distinct_namespaces(models, cluster=None):
    """The namespaces the rows of `models` use (in `cluster`), in one query that walks the namespace
    index from value to value (a recursive "skip scan": one index probe per namespace) instead of a
    DISTINCT that reads every claim and pod on every page."""
    parts, params = [], []
    for i, model in enumerate(models):
        table = connection.ops.quote_name(model._meta.db_table)
        where, extra = ("cluster_id = %s", [cluster.id]) if cluster is not None else ("1 = 1", [])
        parts.append(
            f"ns{i}(v) AS (SELECT MIN(namespace) FROM {table} WHERE {where} "
            f"UNION ALL SELECT (SELECT MIN(namespace) FROM {table} WHERE namespace > ns{i}.v AND {where}) FROM ns{i} WHERE ns{i}.v IS NOT NULL)"
        )
        params += extra * 2
    union = " UNION ".join(f"SELECT v FROM ns{i} WHERE v IS NOT NULL" for i in range(len(models)))
    with connection.cursor() as cursor:
        cursor.execute(f"WITH RECURSIVE {', '.join(parts)} {union}", params)
        return {v for (v,) in cursor.fetchall()}


class ObjectGone(Exception):
    """Raised by a detail page's look_up for an object that is gone but remembered: its last-seen page."""

    def __init__(self, record):
        super().__init__(str(record))
        self.record = record


class DashboardView(LoginRequiredMixin, TemplateView):
    """Base of every UI page.

    `regions` maps a region name to the partial template rendering it; `?fragment=<region>` returns
    just that partial, which the page's JavaScript swaps in place when the live socket reports a
    change of one of `live_kinds`. Regions re-render with the page's own filters (same query string).
    """

    regions = {}
    live_kinds = ()
    required_role = roles.VIEWER
    nav = ""
    # The page_panels name of the page, which is also the attribute holding its object (if any):
    # "device" -> self.device. Their HTML is `panels` in the context (full page loads only).
    panels = ""

    def dispatch(self, request, *args, **kwargs):
        if not request.user.is_authenticated:
            return self.handle_no_permission()
        if not roles.has_role(request.user, self.required_role):
            raise PermissionDenied(f"The {self.required_role} role is needed to see this page.")
        try:
            self.look_up(request, **kwargs)
        except ObjectGone as gone:
            return self.gone_page(gone.record)
        self.cluster = self.selected_cluster(request)
        self.namespace = self.selected_namespace(request)
        try:
            check_search_text(request)
            return super().dispatch(request, *args, **kwargs)
        except BadRequest as exc:
            return self.bad_request(exc)

    def bad_request(self, exc):
        """A 400 that says what was wrong, in the site's layout (navigation and cluster picker work)."""
        context = {"view": self, "message": str(exc), **self.layout_context()}
        return TemplateResponse(self.request, "gpudash/bad_request.html", context, status=400)

    def gone_page(self, record):
        """The "last seen" page (404) of an object gpudash mirrored once (inventory.models.Vanished), in
        the site's layout. Its live regions come from /live/: this URL answers every GET with this page."""
        self.cluster = record.cluster
        self.namespace = self.selected_namespace(self.request)
        scope = {"cluster": record.cluster_id, "kind": []}
        url = reverse("live-regions") + "?" + urlencode({"cluster": record.cluster.name})
        holder_shown = bool(record.held_by_name) and roles.can_see_namespace(
            self.request.user, record.held_by_namespace
        )
        context = {"view": self, "record": record, "holder_shown": holder_shown, **self.layout_context(scope, url)}
        return TemplateResponse(self.request, "inventory/vanished.html", context, status=404)

    def look_up(self, request, **kwargs):
        """Detail pages find their object here: after the login and role checks, so a stranger gets the
        same redirect to the login page whether the object exists or not."""

    @staticmethod
    def selected_cluster(request):
        """?cluster=<name> (remembered in the session), 'all' or nothing = every cluster."""
        name = request.GET.get("cluster")
        if name is None:
            name = request.session.get(SESSION_CLUSTER, "all")
        elif request.session.get(SESSION_CLUSTER) != name:
            request.session[SESSION_CLUSTER] = name
        if not name or name == "all":
            return None
        cluster = Cluster.objects.filter(name=name).first()
        if cluster is None:
            request.session[SESSION_CLUSTER] = "all"
            raise Http404(f"No cluster named {name!r}.")
        return cluster

    @staticmethod
    def selected_namespace(request):
        """The global namespace selector: ?ns=<namespace> (remembered in the session, across pages),
        '' or 'all' = every namespace. Namespaced lists (claims, pods, search) default to it; a
        namespace the user may not see is dropped rather than shown empty."""
        name = request.GET.get("ns")
        if name is None:
            name = request.session.get(SESSION_NAMESPACE, "")
        name = "" if name == "all" else name.strip()
        if name and not roles.can_see_namespace(request.user, name):
            name = ""
        if request.session.get(SESSION_NAMESPACE, "") != name:
            request.session[SESSION_NAMESPACE] = name
        return name

    def namespace_options(self):
        """Namespaces for the selector: those of the rows of NAMESPACE_MODELS (claims and pods) the user
        may see (read when the page renders the selector, not for live fragments)."""
        if not NAMESPACE_MODELS:
            found = set()
        elif roles.visible_namespaces(self.request.user) is None:
            found = distinct_namespaces(tuple(NAMESPACE_MODELS), self.cluster)
        else:  # a scoped user: which of its (few) namespaces have claims or pods
            found = set()
            for model in NAMESPACE_MODELS:
                found |= set(
                    roles.scope_queryset(self.in_cluster(model.objects.all()), self.request.user)
                    .values_list("namespace", flat=True)
                    .order_by()
                    .distinct()
                )
        return sorted(set(found) | ({self.namespace} - {""}))

    def one_cluster(self):
        """Only one cluster's rows are listed (one is selected, or only one is mirrored): a list's
        "cluster" column is then constant (tables.Sorting.constant); asked only when sorting by it."""
        return self.cluster is not None or Cluster.objects.count() <= 1

    @property
    def cluster_ids(self):
        return None if self.cluster is None else [self.cluster.id]

    def in_cluster(self, queryset, field="cluster"):
        return queryset if self.cluster is None else queryset.filter(**{field: self.cluster})

    def live_scope(self):
        return {"cluster": self.cluster.id if self.cluster else None, "kind": list(self.live_kinds)}

    def live_url(self):
        """Where live.js GETs the page's regions: the page's own URL, except for a page that answers a
        POST (the release confirmation), whose URL takes no GET; its shared regions come from /live/."""
        if self.request.method == "GET":
            return ""
        query = "?" + urlencode({"cluster": self.cluster.name}) if self.cluster else ""
        return reverse("live-regions") + query

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        ctx.update(self.layout_context())
        if self.panels and not self.request.GET.get("fragment"):
            ctx["panels"] = page_panels(self.panels, self, getattr(self, self.panels, None))
        return ctx

    def layout_context(self, scope=None, url=None):
        """What base.html needs: the navigation, pickers and connection status (`scope` and `url`
        replace the page's live scope and region URL)."""
        return dict(
            clusters=Cluster.objects.all(),
            cluster=self.cluster,
            global_namespace=self.namespace,
            namespace_options=self.namespace_options,  # a callable: only evaluated where rendered
            connections=connections(),
            live_scope=json.dumps(self.live_scope() if scope is None else scope),
            live_url=self.live_url() if url is None else url,
            nav=self.nav,
            role=roles.role_of(self.request.user),
            can_operate=roles.can_operate(self.request.user),
            stuck_count=active_finding_count(self.request.user, self.cluster),
        )

    # A page's own names for filters of its FilterSet (links and bookmarks keep working): name -> filter.
    filter_aliases = {}

    def filter_with(self, filterset_class, queryset, **defaults):
        """`queryset` through the list's FilterSet (the API's own, so a page's filters work unchanged
        on its endpoint) with the request's filters, `defaults` where the request has none. Invalid
        filters list nothing; the FilterSet's errors say why (also those its filters find while
        filtering, such as a device filter clause naming nothing any device publishes)."""
        params = self.request.GET.copy()
        for key in PAGE_PARAMS:
            params.pop(key, None)
        for old, new in self.filter_aliases.items():
            if old in params:
                values = params.pop(old)
                if new not in params:
                    params.setlist(new, values)
        for key, value in defaults.items():
            if value and key not in params:
                params[key] = value
        filterset = filterset_class(params, queryset=queryset)
        if not filterset.is_valid():
            return queryset.none(), filterset
        filtered = filterset.qs
        return (queryset.none() if filterset.errors else filtered), filterset

    def paginate(self, items, per_page=100):
        """A page of `items`: ?page=N, and ?per_page=M (1 to 1000) instead of the page's default size
        (anything else is a 400 page saying so; a bad page number shows the first or last page)."""
        raw = self.request.GET.get("per_page", "")
        if raw:
            per_page = whole_number(raw, 1, MAX_PER_PAGE)
            if per_page is None:
                raise BadRequest(
                    gettext("Rows per page (per_page) must be a whole number from 1 to %(max)s.")
                    % {"max": MAX_PER_PAGE}
                )
        # Querysets: the API's bounded count (exact up to GPUDASH_API_EXACT_COUNT_LIMIT, then an
        # estimate the pager says is one); lists of rows built in Python are counted as they are.
        paginator = (BoundedCountPaginator if isinstance(items, QuerySet) else Paginator)(items, per_page)
        page = paginator.get_page(self.request.GET.get("page"))
        query = self.request.GET.copy()
        query.pop("page", None)
        query.pop("fragment", None)
        return {"page_obj": page, "page_query": query.urlencode()}

    def render_to_response(self, context, **response_kwargs):
        region = self.request.GET.get("fragment")
        if region:
            if region in SHARED_REGIONS:
                return TemplateResponse(self.request, SHARED_REGIONS[region], context)
            if region not in self.regions:
                raise Http404(f"This page has no region {region!r}.")
            return TemplateResponse(self.request, self.regions[region], context)
        return super().render_to_response(context, **response_kwargs)


def check_search_text(request):
    """A 400 for a search text over MAX_SEARCH_LENGTH characters, before any page queries with it."""
    q = request.GET.get("q", "")
    if len(q) > MAX_SEARCH_LENGTH:
        raise BadRequest(
            gettext("The search text is %(length)s characters long; search for at most %(max)s characters.")
            % {
                "length": number_format(len(q), force_grouping=True),
                "max": number_format(MAX_SEARCH_LENGTH, force_grouping=True),
            }
        )


class LiveRegionsView(DashboardView):
    """Only the regions every page shares (?fragment=conn, ?fragment=navstuck), for pages whose own URL
    cannot be fetched again with GET."""

    def render_to_response(self, context, **response_kwargs):
        if self.request.GET.get("fragment") not in SHARED_REGIONS:
            raise Http404("Ask for ?fragment=conn or ?fragment=navstuck.")
        return super().render_to_response(context, **response_kwargs)
