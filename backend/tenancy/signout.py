"""Signing out ends the sign-in everywhere: its cookie opens nothing more, and the websockets
it opened (in any web process) are closed with 4401 (tenancy.credentials).

The portal has three ways to sign out: the dashboard's (`POST /api/v1/auth/logout/`,
`sign_out`), the Django admin's and the browsable API's (Django's own views, wrapped with
`sign_out_closes_websockets` in config.urls).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponseBase

from tenancy.credentials import session_ended


def sign_out(request: HttpRequest) -> None:
    """Sign the request's user out and close the websockets this sign-in opened."""
    key = request.session.session_key
    logout(request)
    if key:
        session_ended(session_key=key)


def sign_out_closes_websockets(
    view: Callable[..., HttpResponseBase],
) -> Callable[..., HttpResponseBase]:
    """A sign-out view of Django's whose sign-out (the sign-in's key gone from the request:
    Django's logout flushes it) also closes that sign-in's websockets."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        key = request.session.session_key
        response = view(request, *args, **kwargs)
        if key and request.session.session_key != key:
            session_ended(session_key=key)
        return response

    return wrapped
