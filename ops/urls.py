"""Operations pages (stuck claims, Pending pods, readiness, audit log) and the navigation's search box,
which look at inventory and claims together; included from gpudash/urls.py."""

from django.urls import path

from . import views, views_fleet, views_preview, views_readiness, views_search

app_name = "ops"

urlpatterns = [
    path("stuck/", views.StuckClaimsView.as_view(), name="stuck"),
    path("stuck/release/", views.ReleaseFindingsView.as_view(), name="stuck-release"),
    path("pending/", views.PendingPodView.as_view(), name="pending"),
    path(
        "pending/<slug:cluster_name>/<str:namespace>/<path:name>/",
        views.PendingPodView.as_view(),
        name="pending-pod",
    ),
    path("readiness/", views_readiness.ReadinessView.as_view(), name="readiness"),
    path("audit/", views.AuditLogView.as_view(), name="audit"),
    path("search/", views_search.SearchView.as_view(), name="search"),  # the navigation's search box
]

# Pages that show inventory and claims together but keep the URL names they had in their app's namespace
# (inventory:overview, claims:preview, ...): the shell adds them to that namespace (gpudash/urls.py).
inventory_pages = [
    path("", views_fleet.OverviewView.as_view(), name="overview"),
    path("nodes/<slug:cluster>/<str:name>/", views_fleet.NodeDetailView.as_view(), name="node-detail"),
    # Pool names may contain slashes; driver and device names never do.
    path(
        "devices/<slug:cluster>/<str:driver>/<path:pool>/<str:device>/",
        views_fleet.DeviceDetailView.as_view(),
        name="device-detail",
    ),
    path("classes/<slug:cluster>/<path:name>/", views_fleet.DeviceClassDetailView.as_view(), name="class-detail"),
]
claims_pages = [
    path("preview/", views_preview.PreviewView.as_view(), name="preview"),
]
