"""Dashboard pages."""

from django.urls import path

from . import views

app_name = "dashboard"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("queries/<int:pk>/", views.query_detail, name="query"),
    path("streams/<int:pk>/", views.stream_detail, name="stream"),
    path("schemas/<int:pk>/", views.schema_detail, name="schema"),
    path("status/", views.status, name="status"),
    path("favicon.ico", views.favicon, name="favicon"),
]
