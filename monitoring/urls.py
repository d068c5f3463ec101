from django.urls import path

from . import views

app_name = "monitoring"

urlpatterns = [
    path("dra-metrics/", views.DRAMetricsView.as_view(), name="dra-metrics"),
    path("history/namespaces/<str:namespace>/", views.NamespaceHistoryView.as_view(), name="namespace-history"),
]
