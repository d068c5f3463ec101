from django.urls import path

from . import views, views_objects

app_name = "inventory"

urlpatterns = [
    path("", views.OverviewView.as_view(), name="overview"),
    path("fleet/map/", views.FleetMapView.as_view(), name="fleet-map"),
    path("nodes/", views.NodeListView.as_view(), name="node-list"),
    path("nodes/<slug:cluster>/<str:name>/", views.NodeDetailView.as_view(), name="node-detail"),
    path("devices/", views.DeviceListView.as_view(), name="device-list"),
    # Pool names may contain slashes; driver and device names never do.
    path(
        "devices/<slug:cluster>/<str:driver>/<path:pool>/<str:device>/",
        views.DeviceDetailView.as_view(),
        name="device-detail",
    ),
    path("classes/", views.DeviceClassListView.as_view(), name="class-list"),
    path("classes/<slug:cluster>/<path:name>/", views_objects.DeviceClassDetailView.as_view(), name="class-detail"),
    path("slices/", views.SliceListView.as_view(), name="slice-list"),
    path("slices/<slug:cluster>/<path:name>/", views_objects.SliceDetailView.as_view(), name="slice-detail"),
    path("pools/", views.PoolListView.as_view(), name="pool-list"),
]
