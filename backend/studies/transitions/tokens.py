"""A run attempt's bearer token: derived from the run and the attempt, only its hash stored."""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

from django.utils.crypto import salted_hmac


def hash_run_token(token: str) -> str:
    """What is stored of a run attempt's bearer token (the agent holds the token itself)."""
    return hashlib.sha256(token.encode()).hexdigest()


def run_token(*, run_id: Any, attempt: int) -> str:
    """The bearer token of a run's attempt: an HMAC of the run and the attempt under the
    portal's SECRET_KEY. Only its hash is stored (the current attempt's, `token_hash`); being
    derived, the token of an earlier attempt can still be recognised, so that attempt's
    agent, if it is still alive, is told 409 (stop) while any other caller learns nothing
    (run_token_is_of)."""
    digest = salted_hmac("windtunnel.run-token", f"{run_id}:{attempt}", algorithm="sha256")
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def run_token_is_of(token: str, *, run_id: Any, attempt: int) -> bool:
    """Whether `token` is the bearer token the portal gave this attempt of this run."""
    return hmac.compare_digest(token.encode(), run_token(run_id=run_id, attempt=attempt).encode())
