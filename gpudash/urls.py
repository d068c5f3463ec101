from csp.constants import UNSAFE_INLINE
from csp.decorators import csp_update
from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from claims import urls as claims_urls
from inventory import urls as inventory_urls
from mirror.health import healthz, readyz
from mirror.views import LiveRegionsView
from mirror.views_sync import SyncStatusView
from monitoring.metrics import metrics_view
from ops import urls as ops_urls


class FaviconView(RedirectView):
    """Browsers ask for /favicon.ico whatever the page links: the static icon, not a 404 (resolved per
    request, so a hashed static name from the manifest is used where there is one)."""

    permanent = True

    def get_redirect_url(self, *args, **kwargs):
        return static("gpudash/favicon.svg")


urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    path("favicon.ico", FaviconView.as_view(), name="favicon"),
    path("admin/", admin.site.urls),
    # The nav's language switch posts here; the choice is kept in a cookie (issue 14).
    path("i18n/", include("django.conf.urls.i18n")),
    path(
        "", include("accounts.urls")
    ),  # login (password and/or OIDC), access profile, /oidc/ when OIDC is on (issue 13)
    path("accounts/", include("django.contrib.auth.urls")),
    # REST API (issue 5): versioned routes, OpenAPI schema and browsable docs.
    path("api/v1/", include("gpudash.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves Swagger UI's start-up script as a file (no inline script for the CSP to
    # refuse); its page keeps one inline <style>, allowed on this page only.
    path(
        "api/docs/",
        csp_update({"style-src": [UNSAFE_INLINE]})(SpectacularSwaggerSplitView.as_view(url_name="api-schema")),
        name="api-docs",
    ),
    # Web UI pages (issue 4).
    # The inventory and claims namespaces also hold the ops pages that show both and kept their
    # inventory:... and claims:... names (ops/urls.py).
    path("", include((inventory_urls.urlpatterns + ops_urls.inventory_pages, inventory_urls.app_name))),
    path("", include((claims_urls.urlpatterns + ops_urls.claims_pages, claims_urls.app_name))),
    # Operations pages (issue 6): stuck claims, Pending pods, readiness; the search box (ops/).
    path("", include("ops.urls")),
    # Fleet history pages (issue 11): a namespace's charts.
    path("", include("monitoring.urls")),
    # Usage reports (issue 36): GPU-hours by namespace, team, workload, model, node pool.
    path("", include("usage.urls")),
    path("live/", LiveRegionsView.as_view(), name="live-regions"),  # shared regions for POST-answered pages
    path("sync/", SyncStatusView.as_view(), name="sync-status"),  # who holds which lease (issue 15)
]
