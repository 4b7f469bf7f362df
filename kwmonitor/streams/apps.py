from django.apps import AppConfig


class StreamsConfig(AppConfig):
    name = "kwmonitor.streams"
    verbose_name = "Streams and evaluators"

    def ready(self) -> None:
        from . import signals  # noqa: F401  (plan publishing when queries or streams change)
