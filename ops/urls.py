"""Operations pages (stuck claims, Pending pods, readiness, audit log) and the navigation's search box,
which look at inventory and claims together; included from gpudash/urls.py."""

from django.urls import path

from . import views, views_preview, views_readiness, views_search

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
# (claims:preview): the shell adds them to that namespace (gpudash/urls.py).
claims_pages = [
    path("preview/", views_preview.PreviewView.as_view(), name="preview"),
]
