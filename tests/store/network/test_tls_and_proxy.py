"""The store client over TLS (own CA, client certificates) and through HTTP(S) forward proxies.

A local store server is fronted by a TLS terminator whose certificate is signed by a CA made here, and a
local forward proxy (CONNECT tunnels and absolute-form requests) resolves the made-up name ``store.test``.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from agl_core.store import InvalidRequestError
from agl_core.store.http import BackgroundServer, LightningStoreClient
from agl_core.store.http.errors import StoreUnavailableError
from agl_core.store.memory import InMemoryLightningStore

NAMES = {"store.test": "127.0.0.1"}


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Certificate | None,
    issuer_key,
    *,
    ca: bool,
    san=None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer.subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        ).add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False
        )
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


@dataclass
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _write(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey | None = None) -> None:
    data = cert.public_bytes(serialization.Encoding.PEM)
    path.write_bytes(data)
    if key is not None:
        path.with_suffix(".key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = tmp_path_factory.mktemp("pki")
    ca_key = _key()
    ca = _cert("agl test CA", ca_key, None, ca_key, ca=True)
    server_key = _key()
    san = [
        x509.DNSName("localhost"),
        x509.DNSName("store.test"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    server = _cert("store.test", server_key, ca, ca_key, ca=False, san=san)
    client_key = _key()
    client = _cert("runner-1", client_key, ca, ca_key, ca=False)
    _write(root / "ca.pem", ca)
    _write(root / "server.pem", server, server_key)
    _write(root / "client.pem", client, client_key)
    return Pki(
        root / "ca.pem", root / "server.pem", root / "server.key", root / "client.pem", root / "client.key"
    )


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def _splice(
    a: tuple[asyncio.StreamReader, asyncio.StreamWriter], b_host: str, b_port: int, first: bytes
) -> None:
    reader, writer = await asyncio.open_connection(b_host, b_port)
    writer.write(first)
    await asyncio.gather(_pipe(a[0], writer), _pipe(reader, a[1]))


@dataclass
class Network:
    """A TLS terminator (in front of a plain store server) and a forward proxy, on one background loop."""

    store_port: int
    tls_port: int = 0
    mtls_port: int = 0
    proxy_port: int = 0
    proxy_log: list[str] = field(default_factory=list)
    proxy_auth: list[str | None] = field(default_factory=list)


async def _proxy_handler(net: Network, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    request_line, *header_lines = head.split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines if line)}
    net.proxy_log.append(request_line)
    net.proxy_auth.append(headers.get("proxy-authorization"))
    method, target, _ = request_line.split(" ")
    if method == "CONNECT":
        host, _, port = target.rpartition(":")
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await _splice((reader, writer), NAMES.get(host, host), int(port), b"")
        return
    rest = target.removeprefix("http://")
    authority, _, path = rest.partition("/")
    host, _, port = authority.rpartition(":")
    kept = [line for line in header_lines if line and not line.lower().startswith("proxy-")]
    forwarded = f"{method} /{path} HTTP/1.1\r\n" + "".join(f"{line}\r\n" for line in kept) + "\r\n"
    await _splice((reader, writer), NAMES.get(host, host), int(port), forwarded.encode("latin-1"))


@pytest.fixture(scope="module")
def network(pki: Pki) -> Iterator[Network]:
    with BackgroundServer(InMemoryLightningStore, allowed_hosts=["store.test"]) as store_server:
        net = Network(store_port=int(store_server.endpoint.rsplit(":", 1)[1]))
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        servers: list[asyncio.base_events.Server] = []

        async def start() -> None:
            tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            tls.load_cert_chain(pki.server_cert, pki.server_key)
            mtls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca))
            mtls.load_cert_chain(pki.server_cert, pki.server_key)
            mtls.verify_mode = ssl.CERT_REQUIRED

            async def terminate(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                await _splice((reader, writer), "127.0.0.1", net.store_port, b"")

            async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                await _proxy_handler(net, reader, writer)

            for context, attr in ((tls, "tls_port"), (mtls, "mtls_port")):
                server = await asyncio.start_server(terminate, "127.0.0.1", 0, ssl=context)
                servers.append(server)
                setattr(net, attr, server.sockets[0].getsockname()[1])
            server = await asyncio.start_server(proxy, "127.0.0.1", 0)
            servers.append(server)
            net.proxy_port = server.sockets[0].getsockname()[1]
            ready.set()

        thread = threading.Thread(
            target=lambda: (loop.run_until_complete(start()), loop.run_forever()), daemon=True
        )
        thread.start()
        assert ready.wait(60)
        try:
            yield net
        finally:
            for server in servers:
                loop.call_soon_threadsafe(server.close)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(60)


async def _round_trip(client: LightningStoreClient) -> str:
    try:
        started = await client.start_rollout(input={"q": 1})
        fetched = await client.get_rollout_by_id(started.rollout_id)
        assert fetched is not None
        return fetched.rollout_id
    finally:
        await client.close()


def _client(url: str, **kwargs) -> LightningStoreClient:  # type: ignore[no-untyped-def]
    return LightningStoreClient(url, retries=0, retry_timeout=0, timeout=30, **kwargs)


@pytest.fixture(autouse=True)
def _no_environment_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "ALL_PROXY",
    ):
        monkeypatch.delenv(name, raising=False)
    for name in ("AGL_STORE_CA_BUNDLE", "AGL_STORE_CLIENT_CERT", "AGL_STORE_CLIENT_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_https_store_with_a_custom_ca_bundle(network: Network, pki: Pki) -> None:
    url = f"https://localhost:{network.tls_port}"
    assert asyncio.run(_round_trip(_client(url, ca_bundle=str(pki.ca))))
    with pytest.raises(Exception, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
        asyncio.run(_round_trip(_client(url)))


def test_the_ca_bundle_comes_from_the_environment(
    network: Network, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGL_STORE_CA_BUNDLE", str(pki.ca))
    assert asyncio.run(_round_trip(_client(f"https://127.0.0.1:{network.tls_port}")))


def test_mutual_tls_needs_the_client_certificate(network: Network, pki: Pki) -> None:
    url = f"https://localhost:{network.mtls_port}"
    with_cert = _client(
        url, ca_bundle=str(pki.ca), client_cert=str(pki.client_cert), client_key=str(pki.client_key)
    )
    assert asyncio.run(_round_trip(with_cert))
    with pytest.raises(Exception):  # noqa: B017 - the server ends the handshake; the error text varies by OpenSSL
        asyncio.run(_round_trip(_client(url, ca_bundle=str(pki.ca))))


def test_https_through_the_environment_proxy_uses_a_connect_tunnel(
    network: Network, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{network.proxy_port}")
    before = len(network.proxy_log)
    url = f"https://store.test:{network.tls_port}"
    assert asyncio.run(_round_trip(_client(url, ca_bundle=str(pki.ca))))
    assert network.proxy_log[before:] == [f"CONNECT store.test:{network.tls_port} HTTP/1.1"]


def test_http_through_a_proxy_with_credentials_sends_absolute_form_requests(network: Network) -> None:
    before = len(network.proxy_log)
    proxy = f"http://agl:pa%20ss@127.0.0.1:{network.proxy_port}"
    assert asyncio.run(_round_trip(_client(f"http://store.test:{network.store_port}", proxy=proxy)))
    seen = network.proxy_log[before:]
    assert seen and all(
        line.split(" ")[1].startswith(f"http://store.test:{network.store_port}/") for line in seen
    )
    expected = "Basic " + base64.b64encode(b"agl:pa ss").decode()
    assert set(network.proxy_auth[before:]) == {expected}


def test_http_through_the_environment_proxy(network: Network, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{network.proxy_port}")
    before = len(network.proxy_log)
    assert asyncio.run(_round_trip(_client(f"http://store.test:{network.store_port}")))
    assert network.proxy_log[before:]
    # without trust_env the environment's proxy is not used: store.test does not resolve directly
    with pytest.raises(StoreUnavailableError, match="Cannot reach"):
        asyncio.run(_round_trip(_client(f"http://store.test:{network.store_port}", trust_env=False)))


def test_no_proxy_and_loopback_go_direct(network: Network, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{network.proxy_port}")
    before = len(network.proxy_log)
    # a loopback server is reached directly, also with an explicit proxy
    assert asyncio.run(_round_trip(_client(f"http://127.0.0.1:{network.store_port}")))
    proxy = f"http://127.0.0.1:{network.proxy_port}"
    assert asyncio.run(_round_trip(_client(f"http://localhost:{network.store_port}", proxy=proxy)))
    # NO_PROXY names store.test: the client goes direct, where that name does not resolve
    monkeypatch.setenv("NO_PROXY", "store.test,.corp.example")
    with pytest.raises(StoreUnavailableError, match="Cannot reach"):
        asyncio.run(_round_trip(_client(f"http://store.test:{network.store_port}")))
    assert network.proxy_log[before:] == []


def test_bad_tls_and_proxy_settings_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequestError, match="is not a file"):
        LightningStoreClient("https://store.test", ca_bundle=str(tmp_path / "missing.pem"))
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(InvalidRequestError, match="PEM"):
        LightningStoreClient("https://store.test", ca_bundle=str(tmp_path / "junk.pem"))
    with pytest.raises(InvalidRequestError, match="Proxy URL"):
        LightningStoreClient("http://store.test", proxy="socks5://127.0.0.1:1080")


def test_settings_survive_pickling(pki: Pki) -> None:
    import pickle

    client = LightningStoreClient("https://store.test", ca_bundle=str(pki.ca), proxy="http://127.0.0.1:3128")
    copy = pickle.loads(pickle.dumps(client))
    assert (copy.ca_bundle, copy.proxy) == (str(pki.ca), "http://127.0.0.1:3128")
