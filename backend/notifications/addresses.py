"""Where a webhook may point: http(s) URLs, and (unless WINDTUNNEL_WEBHOOK_ALLOW_PRIVATE) only
public addresses, so a tenant cannot make the portal's worker call into its own network
(the metadata service at 169.254.169.254, the database, an admin interface on loopback).

An IPv6 address that carries an IPv4 address is judged by that IPv4 address too: IPv4-mapped
(`::ffff:127.0.0.1`), IPv4-translated (`::ffff:0:127.0.0.1`), IPv4-compatible
(`::127.0.0.1`), NAT64 (`64:ff9b::7f00:1`; the local-use `64:ff9b:1::/48` is refused
whole), 6to4 (`2002:7f00:1::`) and Teredo (`2001::/32`, its client address XOR-ed). Any
other IPv6 address must be global unicast (`2000::/3`).

The address is checked when the webhook is saved, and again when it is sent: the delivery
resolves the name once, checks every address it resolves to, and connects to a checked
address itself (`allowed_addresses`), so a name that resolves elsewhere a moment later
(DNS rebinding) changes nothing. Redirects are not followed."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings

SCHEMES = ("http", "https")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052's well-known prefix
NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")  # RFC 8215: a network's own translator
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")  # RFC 4291, deprecated
IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")  # RFC 2765 (SIIT)

ALLOW_HINT = (
    "this portal sends webhooks to public addresses only (an operator can allow private ones "
    "with WINDTUNNEL_WEBHOOK_ALLOW_PRIVATE=true)"
)


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
    return allowed_addresses(host, port)[1]


def allowed_addresses(host: str, port: int) -> tuple[list[Address], str | None]:
    """The addresses `host` resolves to, each one the portal may send to, or why not (then
    no address): a name with one refused address among several is refused. With
    WINDTUNNEL_WEBHOOK_ALLOW_PRIVATE, ([], None): the host is sent to as it is."""
    if settings.WINDTUNNEL["WEBHOOK_ALLOW_PRIVATE"]:
        return [], None
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        return [], f"the host {host} does not resolve ({exc}); check the URL's spelling"
    addresses: list[Address] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        why = refusal(address)
        if why:
            named = (
                f"the address {host}"
                if _literal(host) == address
                else f"the host {host} resolves to {address}, which"
            )
            return [], f"{named} is {why}: {ALLOW_HINT}"
        if address not in addresses:
            addresses.append(address)
    return addresses, None


def refusal(address: Address) -> str | None:
    """What makes `address` one the portal may not send to (as a phrase: "a loopback
    address"), or None for a public one."""
    if isinstance(address, ipaddress.IPv4Address):
        if address.is_multicast or not address.is_global:
            return f"a private, loopback, link-local or reserved address ({address})"
        return None
    if address in NAT64_LOCAL:
        return f"an address of a local NAT64 translator ({address}, in {NAT64_LOCAL})"
    carried = embedded_ipv4(address)
    if carried is not None:
        form, ipv4 = carried
        if refusal(ipv4):
            return (
                f"an address that carries the private, loopback, link-local or reserved IPv4 "
                f"address {ipv4} ({address}, {form})"
            )
        if address not in GLOBAL_UNICAST:
            return None  # mapped, translated, compatible, NAT64: the IPv4 address decides
    if address.is_multicast or not address.is_global or address not in GLOBAL_UNICAST:
        return f"a private, loopback, link-local or reserved address ({address})"
    return None


def embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address an IPv6 address carries and the form it is in, or None."""
    if address.ipv4_mapped is not None:
        return "IPv4-mapped", address.ipv4_mapped
    low = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in IPV4_TRANSLATED:
        return "IPv4-translated", low
    if address in NAT64:
        return "NAT64", low
    if address in IPV4_COMPATIBLE and int(address) > 1:  # not :: nor ::1
        return "IPv4-compatible", low
    if address.sixtofour is not None:
        return "6to4", address.sixtofour
    if address.teredo is not None:
        return "Teredo", address.teredo[1]  # (server, client): the client is reached
    return None


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return None
