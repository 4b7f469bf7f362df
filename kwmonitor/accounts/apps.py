from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "kwmonitor.accounts"
    verbose_name = "Accounts and API tokens"
