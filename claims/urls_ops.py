"""Operations pages (stuck claims, Pending pods, readiness, audit log); included from gpudash/urls.py."""

from django.urls import path

from inventory.views_readiness import ReadinessView

from . import views_ops

app_name = "ops"

urlpatterns = [
    path("stuck/", views_ops.StuckClaimsView.as_view(), name="stuck"),
    path("stuck/release/", views_ops.ReleaseFindingsView.as_view(), name="stuck-release"),
    path("pending/", views_ops.PendingPodView.as_view(), name="pending"),
    path(
        "pending/<slug:cluster_name>/<str:namespace>/<path:name>/",
        views_ops.PendingPodView.as_view(),
        name="pending-pod",
    ),
    path("readiness/", ReadinessView.as_view(), name="readiness"),
    path("audit/", views_ops.AuditLogView.as_view(), name="audit"),
]
