"""URLs of the Versions panel and the live app."""

from django.urls import path

app_name = "versions"

urlpatterns: list = []
