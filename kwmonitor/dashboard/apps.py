from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "kwmonitor.dashboard"
    verbose_name = "Dashboards"
