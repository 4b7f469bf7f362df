from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "kwmonitor.catalog"
    verbose_name = "Schemas"
