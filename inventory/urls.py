from django.urls import path

from . import views, views_objects

app_name = "inventory"

urlpatterns = [
    path("fleet/map/", views.FleetMapView.as_view(), name="fleet-map"),
    path("nodes/", views.NodeListView.as_view(), name="node-list"),
    path("devices/", views.DeviceListView.as_view(), name="device-list"),
    path("classes/", views.DeviceClassListView.as_view(), name="class-list"),
    path("slices/", views.SliceListView.as_view(), name="slice-list"),
    path("slices/<slug:cluster>/<path:name>/", views_objects.SliceDetailView.as_view(), name="slice-detail"),
    path("pools/", views.PoolListView.as_view(), name="pool-list"),
]
