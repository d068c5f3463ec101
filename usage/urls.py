from django.urls import path

from . import views

app_name = "usage"

urlpatterns = [
    path("usage/", views.UsageReportPage.as_view(), name="report"),
    path("usage/report.csv", views.usage_csv, name="report-csv"),
]
