from django.apps import AppConfig


class QueriesConfig(AppConfig):
    name = "kwmonitor.queries"
    verbose_name = "Keyword queries"
