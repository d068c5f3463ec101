from django.urls import path

from . import views, views_objects, views_whatif

app_name = "claims"

urlpatterns = [
    path("claims/", views.ClaimListView.as_view(), name="claim-list"),
    path("claims/<slug:cluster>/<str:namespace>/<path:name>/", views.ClaimDetailView.as_view(), name="claim-detail"),
    path("pods/", views.PodListView.as_view(), name="pod-list"),
    path("pods/<slug:cluster>/<str:namespace>/<path:name>/", views_objects.PodDetailView.as_view(), name="pod-detail"),
    path("templates/", views.TemplateListView.as_view(), name="template-list"),
    path(
        "templates/<slug:cluster>/<str:namespace>/<path:name>/",
        views_objects.TemplateDetailView.as_view(),
        name="template-detail",
    ),
    path("whatif/", views_whatif.WhatIfView.as_view(), name="whatif"),
]
