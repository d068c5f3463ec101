from django.urls import path

from . import views

app_name = "claims"

urlpatterns = [
    path("claims/", views.ClaimListView.as_view(), name="claim-list"),
    path("claims/<slug:cluster>/<str:namespace>/<path:name>/", views.ClaimDetailView.as_view(), name="claim-detail"),
    path("pods/", views.PodListView.as_view(), name="pod-list"),
    path("preview/", views.PreviewView.as_view(), name="preview"),
]
