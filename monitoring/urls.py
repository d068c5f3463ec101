from django.urls import path

from . import views

app_name = "monitoring"

urlpatterns = [
    path("history/namespaces/<str:namespace>/", views.NamespaceHistoryView.as_view(), name="namespace-history"),
]
