from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "kwmonitor.ingest"
    verbose_name = "Ingest"
