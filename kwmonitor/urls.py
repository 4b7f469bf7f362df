"""URL configuration: admin, login, the dashboards at the root, the ingest API and the JSON API."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("ingest/", include("kwmonitor.ingest.urls")),
    path("api/", include("kwmonitor.queries.urls")),
    path("", include("kwmonitor.dashboard.urls")),
]
