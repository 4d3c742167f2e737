"""Network settings of the store client: TLS trust and client certificates, and HTTP(S) forward proxies.

Proxies come from ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``NO_PROXY`` (either case, as curl and requests read
them) unless an explicit proxy URL is given. Loopback hosts (``localhost``, ``127.0.0.0/8``, ``::1``) never
go through a proxy. ``https://`` stores are reached through a ``CONNECT`` tunnel; ``http://`` stores by
sending absolute-form requests to the proxy. Credentials in the proxy URL (``http://user:pass@proxy:3128``)
are sent as ``Proxy-Authorization: Basic``.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import ssl
import urllib.request
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

__all__ = ["ProxySettings", "make_ssl_context", "proxy_for"]

CA_BUNDLE_ENV = "AGL_STORE_CA_BUNDLE"
"""Environment variable naming a PEM file of CA certificates to trust for ``https://`` stores."""
CLIENT_CERT_ENV = "AGL_STORE_CLIENT_CERT"
"""Environment variable naming the PEM client certificate (optionally with its key) for mutual TLS."""
CLIENT_KEY_ENV = "AGL_STORE_CLIENT_KEY"
"""Environment variable naming the PEM private key of the client certificate, when in a separate file."""


@dataclass(frozen=True)
class ProxySettings:
    """Where to send a store's requests instead of the store itself."""

    host: str
    port: int
    authorization: str | None = None
    """The ``Proxy-Authorization`` header value, from the URL's credentials."""


def make_ssl_context(
    ca_bundle: str | None = None, client_cert: str | None = None, client_key: str | None = None
) -> ssl.SSLContext:
    """A verifying TLS client context trusting ``ca_bundle`` (else the system CAs), with ``client_cert``.

    Raises:
        ValueError: a file is missing or not a usable PEM certificate or key.
    """
    if client_key and not client_cert:
        raise ValueError("client_key needs client_cert: pass the client certificate too.")
    for label, path in (("ca_bundle", ca_bundle), ("client_cert", client_cert), ("client_key", client_key)):
        if path and not os.path.isfile(path):
            raise ValueError(f"{label} {path!r} is not a file: give the path of a PEM file.")
    try:
        context = ssl.create_default_context(cafile=ca_bundle or None)
        if client_cert:
            context.load_cert_chain(client_cert, client_key or None)
    except ssl.SSLError as exc:
        raise ValueError(
            f"Cannot use the TLS files (ca_bundle={ca_bundle!r}, client_cert={client_cert!r}, "
            f"client_key={client_key!r}): {exc.reason or exc}. They must be PEM files; the key must match "
            "the certificate."
        ) from exc
    return context


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_proxy_url(url: str) -> ProxySettings:
    """A proxy URL (``http://[user:pass@]host[:port]``) as settings.

    Raises:
        ValueError: not an ``http://`` URL with a host.
    """
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(
            f"Proxy URL {url!r} is not usable: give http://host:port (the proxy itself is spoken to in "
            "plain HTTP; https:// stores go through it in a CONNECT tunnel)."
        )
    authorization = None
    if parts.username is not None:
        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        authorization = "Basic " + base64.b64encode(credentials.encode()).decode("ascii")
    return ProxySettings(parts.hostname, parts.port if parts.port is not None else 80, authorization)


def proxy_for(
    scheme: str, host: str, port: int, *, proxy: str | None, trust_env: bool
) -> ProxySettings | None:
    """The proxy to reach ``scheme://host:port`` through: ``proxy`` if given, else the environment's.

    ``proxy=""`` means no proxy. Loopback hosts and hosts matched by ``NO_PROXY`` go direct.
    """
    if _is_loopback(host):
        return None
    if proxy is not None:
        return parse_proxy_url(proxy) if proxy else None
    if not trust_env:
        return None
    proxies = urllib.request.getproxies_environment()
    url = proxies.get(scheme)
    # typeshed leaves out proxy_bypass_environment (urllib.request has it, undocumented, since Python 3.2)
    if not url or urllib.request.proxy_bypass_environment(f"{host}:{port}", proxies):  # type: ignore[attr-defined]
        return None
    return parse_proxy_url(url)
