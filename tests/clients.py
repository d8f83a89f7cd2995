"""Logged-in test clients: one helper each for the admin's session client and the API's client, so a test
says whose client it wants instead of repeating the three lines that log someone in."""

from __future__ import annotations

from typing import Any

from django.test import Client
from rest_framework.test import APIClient


def logged_in(user: Any) -> Client:
    """A Django test client with `user`'s session (the admin and other server-rendered pages)."""
    client = Client()
    client.force_login(user)
    return client


def api_as(user: Any, *, raise_request_exception: bool = True) -> APIClient:
    """A DRF test client authenticated as `user`; `raise_request_exception=False` answers a server error
    with its 500 response instead of raising it in the test."""
    client = APIClient()
    client.raise_request_exception = raise_request_exception
    client.force_authenticate(user)
    return client
