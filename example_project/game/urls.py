from __future__ import annotations

from django.urls import path

from . import views

app_name = "game"

urlpatterns = [
    path("", views.play, name="play"),
    path("guess/", views.guess, name="guess"),
    path("mash/", views.mash, name="mash"),
    path("api/guesses/", views.api_guesses, name="api-guesses"),
    path("api/guesses/<int:pk>/", views.api_guess, name="api-guess"),
]
