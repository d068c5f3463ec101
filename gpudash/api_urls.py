"""Routes of the REST API, version 1 (mounted at /api/v1/). Paths are kebab-case plural nouns."""

from django.urls import path, re_path
from rest_framework.routers import DefaultRouter

from claims.api import views as claim_views
from claims.api.aggregates import AllocationAggregateView
from claims.api.preview import PreviewView, PreviewWorkersView
from claims.api.whatif import ScenarioDetailView, ScenarioListView, WhatIfView
from health.api import DeviceHealthListView, HealthTimelineView
from inventory.api import views as inventory_views
from inventory.api.aggregates import DeviceAggregateView, GpuAggregateView
from mirror.api.errors import not_found_view
from monitoring.api import UtilizationView
from monitoring.api_drametrics import DRAMetricsView
from monitoring.api_history import DeviceHistoryView, NamespaceHistoryView
from ops import api as operations
from usage.api import UsageCsvView, UsageReportView

app_name = "api"

router = DefaultRouter(trailing_slash="/?")
router.register("clusters", inventory_views.ClusterViewSet, basename="cluster")
router.register("nodes", inventory_views.NodeViewSet, basename="node")
router.register("device-classes", inventory_views.DeviceClassViewSet, basename="deviceclass")
router.register("resource-slices", inventory_views.ResourceSliceViewSet, basename="resourceslice")
router.register("devices", inventory_views.DeviceViewSet, basename="device")
router.register("claims", claim_views.ResourceClaimViewSet, basename="resourceclaim")
router.register("claim-templates", claim_views.ResourceClaimTemplateViewSet, basename="resourceclaimtemplate")
router.register("pods", claim_views.PodViewSet, basename="pod")
router.register("audit", claim_views.AuditEntryViewSet, basename="auditentry")
router.register("device-status", claim_views.DeviceStatusViewSet, basename="devicestatus")
router.register("device-health", claim_views.DeviceHealthViewSet, basename="devicehealth")

urlpatterns = [
    path("preview", PreviewView.as_view(), name="preview"),
    path("preview/workers", PreviewWorkersView.as_view(), name="preview-workers"),
    path("whatif", WhatIfView.as_view(), name="whatif"),
    path("whatif/scenarios", ScenarioListView.as_view(), name="whatif-scenarios"),
    path("whatif/scenarios/<int:pk>", ScenarioDetailView.as_view(), name="whatif-scenario"),
    path("aggregates/devices", DeviceAggregateView.as_view(), name="aggregate-devices"),
    path("aggregates/gpus", GpuAggregateView.as_view(), name="aggregate-gpus"),
    path("aggregates/allocation", AllocationAggregateView.as_view(), name="aggregate-allocation"),
    path("utilization", UtilizationView.as_view(), name="utilization"),
    path("dra-metrics", DRAMetricsView.as_view(), name="dra-metrics"),
    path("history/devices", DeviceHistoryView.as_view(), name="history-devices"),
    path("history/namespaces", NamespaceHistoryView.as_view(), name="history-namespaces"),
    path("usage", UsageReportView.as_view(), name="usage"),
    path("usage/csv", UsageCsvView.as_view(), name="usage-csv"),
    # The device health notion (health/); /device-health is the kubelet's reports (claims).
    path("health/devices", DeviceHealthListView.as_view(), name="health-devices"),
    path("health/timeline", HealthTimelineView.as_view(), name="health-timeline"),
    *router.urls,
]


urlpatterns += operations.urlpatterns
# Anything else under /api/v1/ answers in the API's error shape.
urlpatterns.append(re_path(r"^.*$", not_found_view))
