"""Dashboard pages."""

from django.urls import path

from . import sharing, source, subscriptions, views

app_name = "dashboard"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("queries/<int:pk>/", views.query_detail, name="query"),
    path("streams/<int:pk>/", views.stream_detail, name="stream"),
    path("streams/<int:pk>/source/", source.source_fragment, name="stream-source"),
    path("subscriptions/<int:pk>/", subscriptions.subscription_detail, name="subscription"),
    path("schemas/<int:pk>/", views.schema_detail, name="schema"),
    path("status/", views.status, name="status"),
    path("sharing/", sharing.sharing, name="sharing"),
    path("sharing/fragment/", sharing.sharing_fragment, name="sharing-fragment"),
    path("favicon.ico", views.favicon, name="favicon"),
]
