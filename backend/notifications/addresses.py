"""Where a webhook may point: http(s) URLs, and (unless WINDTUNNEL_WEBHOOK_ALLOW_PRIVATE) only
public addresses, so a tenant cannot make the portal's worker call into its own network
(the metadata service at 169.254.169.254, the database, an admin interface on loopback).

The address is checked when the webhook is saved and again before every request (a host
name may resolve elsewhere later). What is left: a name that resolves to a public address
for the check and a private one a moment later (DNS rebinding); docs/notifications.md
suggests an egress proxy or firewall where that matters."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings

SCHEMES = ("http", "https")


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a webhook's address (scheme, host, or a private address when
    those are refused), or None."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"the URL is not valid ({exc})"
    if parts.scheme.lower() not in SCHEMES:
        return f"the URL must start with http:// or https://; got {parts.scheme or 'none'}:"
    if not parts.hostname:
        return "the URL names no host; give e.g. https://hooks.example.com/windtunnel"
    return address_problem(parts.hostname, port or (443 if parts.scheme == "https" else 80))


def address_problem(host: str, port: int) -> str | None:
    """Why the portal may not send to `host` (a private, loopback, link-local or reserved
    address, or a name that resolves to one), or None. Always None with
    WINDTUNNEL_WEBHOOK_ALLOW_PRIVATE."""
    if settings.WINDTUNNEL["WEBHOOK_ALLOW_PRIVATE"]:
        return None
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        return f"the host {host} does not resolve ({exc}); check the URL's spelling"
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
            address = address.ipv4_mapped
        if not address.is_global or address.is_multicast:
            return (
                f"the host {host} is a private, loopback or link-local address ({address}): "
                "this portal sends webhooks to public addresses only (an operator can allow "
                "private ones with WINDTUNNEL_WEBHOOK_ALLOW_PRIVATE=true)"
            )
    return None
