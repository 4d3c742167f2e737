"""Hosts as Linux network namespaces: one switch (a bridge) and hosts on veth links with private addresses.

Everything lives inside namespaces this module creates (named ``agl<pid>-<host>``) and is removed by
`Topology.close`; the root namespace gets no address, route or interface.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any, TypeVar

T = TypeVar("T")

_CLONE_NEWNET = 0x40000000


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def namespaces_unavailable() -> str | None:
    """Why namespaces cannot be made here, or None when they can."""
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"agl{os.getpid()}-probe"
    try:
        _ip("netns", "add", probe)
    except subprocess.CalledProcessError as exc:
        return f"`ip netns add` failed: {exc.stderr.strip()}"
    try:
        _ip("-n", probe, "link", "add", "br-probe", "type", "bridge")
    except subprocess.CalledProcessError as exc:
        return f"cannot create a bridge in a namespace: {exc.stderr.strip()}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)
    return None


def netem_unavailable() -> str | None:
    """Why ``tc qdisc ... netem`` cannot be used here, or None when it can."""
    if shutil.which("tc") is None:
        return "the `tc` command is not installed"
    probe = f"agl{os.getpid()}-netem"
    try:
        _ip("netns", "add", probe)
        done = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                probe,
                "tc",
                "qdisc",
                "add",
                "dev",
                "lo",
                "root",
                "netem",
                "delay",
                "1ms",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return (
            None if done.returncode == 0 else f"tc netem failed: {done.stderr.strip()} (no sch_netem module)"
        )
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)


def remove_stale_namespaces() -> list[str]:
    """Delete namespaces an earlier, killed test run left behind (``agl<pid>-*`` whose pid is gone)."""
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    removed = []
    for line in listing.splitlines():
        match = re.match(r"^(agl(\d+)-\S+)", line)
        if match is None or Path(f"/proc/{match.group(2)}").exists():
            continue
        subprocess.run(["ip", "netns", "del", match.group(1)], capture_output=True, timeout=30)
        removed.append(match.group(1))
    return removed


class Topology:
    """A switch namespace with a bridge, and one namespace per host linked to it by a veth pair.

    Host ``i`` gets ``10.213.<n>.<i+1>/24`` on its ``eth0`` (addresses exist only inside these
    namespaces); names carry the process id, so concurrent runs never share a namespace.
    """

    def __init__(self, hosts: Sequence[str]) -> None:
        remove_stale_namespaces()
        self.prefix = f"agl{os.getpid()}"
        self.switch = f"{self.prefix}-sw"
        self.hosts = list(hosts)
        self.address = {host: f"10.213.{os.getpid() % 250}.{i + 1}" for i, host in enumerate(self.hosts)}
        self._processes: list[subprocess.Popen[str]] = []
        self._created: list[str] = []
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def ns(self, host: str) -> str:
        """Namespace name of ``host``."""
        return f"{self.prefix}-{host}"

    def _port(self, host: str) -> str:
        return f"v{os.getpid()}-{self.hosts.index(host)}"

    def _build(self) -> None:
        for name in [self.switch, *map(self.ns, self.hosts)]:
            _ip("netns", "add", name)
            self._created.append(name)
            _ip("-n", name, "link", "set", "lo", "up")
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for host in self.hosts:
            port = self._port(host)
            _ip(
                "-n",
                self.switch,
                "link",
                "add",
                port,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                self.ns(host),
            )
            _ip("-n", self.switch, "link", "set", port, "master", "br0")
            _ip("-n", self.switch, "link", "set", port, "up")
            _ip("-n", self.ns(host), "addr", "add", f"{self.address[host]}/24", "dev", "eth0")
            _ip("-n", self.ns(host), "link", "set", "eth0", "up")

    # ------------------------------------------------------------------------------ faults

    def cut(self, host: str) -> None:
        """Pull the cable: the switch side of ``host``'s link goes down (the host does not notice)."""
        _ip("-n", self.switch, "link", "set", self._port(host), "down")

    def restore(self, host: str) -> None:
        """Plug the cable back in."""
        _ip("-n", self.switch, "link", "set", self._port(host), "up")

    def delay(self, host: str, milliseconds: int) -> None:
        """Add ``milliseconds`` of round-trip latency to ``host``'s link, half each way; 0 removes it."""
        for ns, dev in ((self.ns(host), "eth0"), (self.switch, self._port(host))):
            tc = ["ip", "netns", "exec", ns, "tc", "qdisc"]
            if milliseconds <= 0:
                subprocess.run([*tc, "del", "dev", dev, "root"], capture_output=True, timeout=30)
                continue
            netem = ["root", "netem", "delay", f"{milliseconds / 2:g}ms"]
            subprocess.run([*tc, "replace", "dev", dev, *netem], check=True, capture_output=True, timeout=30)

    # ------------------------------------------------------------------------------ processes

    def spawn(self, host: str, argv: Sequence[str], log: IO[str]) -> subprocess.Popen[str]:
        """Start ``argv`` inside ``host``'s namespace, output to ``log``; stopped by `close`."""
        process = subprocess.Popen(
            ["ip", "netns", "exec", self.ns(host), *argv],
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._processes.append(process)
        return process

    def close(self) -> None:
        """Stop every process started here, then delete every namespace (and so every link)."""
        for process in self._processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
        self._processes.clear()
        for name in reversed(self._created):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
        self._created.clear()


class NamespaceLoop:
    """An asyncio loop in a thread that has entered a network namespace: its sockets live there.

    Lets the test process talk to hosts of the topology without any address in the root namespace.
    """

    def __init__(self, namespace: str) -> None:
        self.loop = asyncio.new_event_loop()
        ready: Future[None] = Future()
        self._thread = threading.Thread(target=self._run, args=(namespace, ready), daemon=True)
        self._thread.start()
        ready.result(30)

    def _run(self, namespace: str, ready: Future[None]) -> None:
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            fd = os.open(str(Path("/var/run/netns") / namespace), os.O_RDONLY)
            try:
                if libc.setns(fd, _CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns into {namespace} failed")
            finally:
                os.close(fd)
        except BaseException as exc:
            ready.set_exception(exc)
            return
        ready.set_result(None)
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, fn: Callable[[], Coroutine[Any, Any, T]], timeout: float = 120.0) -> T:
        """Run ``fn()`` on the namespaced loop and return its result."""
        return asyncio.run_coroutine_threadsafe(fn(), self.loop).result(timeout)

    def close(self) -> None:
        """Stop the loop and its thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
