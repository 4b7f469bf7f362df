"""Dashboard pages."""

from django.urls import path

from . import query_editor, sharing, source, subscriptions, views

app_name = "dashboard"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("queries/<int:pk>/", views.query_detail, name="query"),
    path("queries/<int:pk>/sharing/", views.query_sharing_note, name="query-sharing"),
    path("queries/new/", query_editor.query_new, name="query-new"),
    path("queries/preview/", query_editor.query_preview, name="query-preview"),
    path("queries/<int:pk>/edit/", query_editor.query_edit, name="query-edit"),
    path("queries/<int:pk>/enabled/", query_editor.query_enabled, name="query-enabled"),
    path("queries/<int:pk>/delete/", query_editor.query_delete, name="query-delete"),
    path("streams/<int:pk>/", views.stream_detail, name="stream"),
    path("streams/<int:pk>/source/", source.source_fragment, name="stream-source"),
    path("subscriptions/<int:pk>/", subscriptions.subscription_detail, name="subscription"),
    path("schemas/<int:pk>/", views.schema_detail, name="schema"),
    path("status/", views.status, name="status"),
    path("sharing/", sharing.sharing, name="sharing"),
    path("sharing/fragment/", sharing.sharing_fragment, name="sharing-fragment"),
    path("favicon.ico", views.favicon, name="favicon"),
]
