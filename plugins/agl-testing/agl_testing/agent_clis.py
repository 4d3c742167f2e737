"""Install real agent CLIs and configure them to call the agl LLM proxy (for tests and examples).

npm CLIs (Claude Code, the Codex CLI) are pinned by ``examples/programs/clis/package.json`` and its
``package-lock.json``: :func:`install_agent_clis` runs ``npm ci`` into an ignored folder (``.agl/npm/``)
once per lock file. Python CLIs (``llm``) are pinned in that folder's ``requirements.txt`` and go into a
venv of their own (:func:`install_python_clis`). :func:`claude_command` and :func:`codex_command` give
each npm CLI's argv prefix; :func:`claude_env`, :func:`codex_env` and :func:`llm_env` the environment
pointing a CLI at a per-rollout proxy URL (:func:`agl_core.llm_proxy.rollout_urls`), default settings
otherwise.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = [
    "NpmMissingError",
    "claude_command",
    "claude_env",
    "codex_command",
    "codex_env",
    "install_agent_clis",
    "install_python_clis",
    "llm_env",
]

_INSTALL_TIMEOUT_S = 900.0
_STAMP = ".agl-installed-lock"


class NpmMissingError(RuntimeError):
    """``npm`` (Node.js) is not on ``PATH``, so the CLIs cannot be installed."""


def install_agent_clis(package_dir: Path, prefix: Path) -> Path:
    """Install the CLIs pinned in ``package_dir`` (package.json + package-lock.json) under ``prefix``.

    Does nothing when ``prefix`` already holds an install of the same lock file. Returns ``prefix``.

    Raises:
        NpmMissingError: without ``npm`` on PATH.
        RuntimeError: when ``npm ci`` fails (its output's tail in the message).
    """
    npm = shutil.which("npm")
    if npm is None:
        raise NpmMissingError("npm is not on PATH: install Node.js (>= 20) to run the agent CLIs")
    lock = (package_dir / "package-lock.json").read_bytes()
    digest = hashlib.sha256(lock + (package_dir / "package.json").read_bytes()).hexdigest()
    stamp = prefix / _STAMP
    if stamp.is_file() and stamp.read_text().strip() == digest:
        return prefix
    prefix.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(package_dir / name, prefix / name)
    done = subprocess.run(
        [npm, "ci", "--prefix", str(prefix), "--no-audit", "--no-fund", "--loglevel=error"],
        capture_output=True,
        text=True,
        timeout=_INSTALL_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"npm ci failed ({done.returncode}): {(done.stdout + done.stderr)[-2000:]}")
    stamp.write_text(digest)
    return prefix


def install_python_clis(requirements: Path, venv: Path) -> Path:
    """Install the pinned Python CLIs of ``requirements`` into their own ``venv``; returns its ``bin``.

    Does nothing when ``venv`` already holds an install of the same requirements file.

    Raises:
        RuntimeError: when creating the venv or ``pip install`` fails (its output's tail in the message).
    """
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    stamp = venv / _STAMP
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    if stamp.is_file() and stamp.read_text().strip() == digest:
        return bin_dir
    for argv in (
        [sys.executable, "-m", "venv", str(venv)],
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", "-r", str(requirements)],
    ):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[2]} failed ({done.returncode}): {(done.stdout + done.stderr)[-2000:]}")
    stamp.write_text(digest)
    return bin_dir


def _platform_suffix() -> str:
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    system = {"linux": "linux", "darwin": "darwin"}.get(platform.system().lower(), platform.system().lower())
    return f"{system}-{arch}"


def claude_command(prefix: Path) -> list[str]:
    """The argv prefix running Claude Code from an install under ``prefix``.

    npm >= 11 skips the package's postinstall (which copies the native binary over ``bin/claude.exe``),
    so the binary of the platform package is used directly.

    Raises:
        FileNotFoundError: when the platform's binary is not installed.
    """
    binary = prefix / "node_modules" / "@anthropic-ai" / f"claude-code-{_platform_suffix()}" / "claude"
    if not binary.is_file():
        raise FileNotFoundError(f"Claude Code's binary for this platform is not installed at {binary}")
    return [str(binary)]


def codex_command(prefix: Path) -> list[str]:
    """The argv prefix running the Codex CLI from an install under ``prefix``.

    Raises:
        FileNotFoundError: when it is not installed.
    """
    launcher = prefix / "node_modules" / ".bin" / "codex"
    if not launcher.exists():
        raise FileNotFoundError(f"The Codex CLI is not installed at {launcher}")
    return [str(launcher)]


def _base_env(home: Path) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "SYSTEMROOT")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env["HOME"] = str(home)
    return env


def claude_env(home: Path, anthropic_base_url: str, api_key: str = "dummy") -> dict[str, str]:
    """Environment running Claude Code with a fresh ``home`` against ``anthropic_base_url``."""
    home.mkdir(parents=True, exist_ok=True)
    return {**_base_env(home), "ANTHROPIC_BASE_URL": anthropic_base_url, "ANTHROPIC_API_KEY": api_key}


def llm_env(home: Path, openai_base_url: str, api_key: str = "dummy") -> dict[str, str]:
    """Environment running ``llm`` (its OpenAI models) with fresh settings in ``home`` against the URL."""
    home.mkdir(parents=True, exist_ok=True)
    return {
        **_base_env(home),
        "LLM_USER_PATH": str(home / "llm"),
        "OPENAI_BASE_URL": openai_base_url,
        "OPENAI_API_KEY": api_key,
    }


def codex_env(home: Path, openai_base_url: str, api_key: str = "dummy") -> dict[str, str]:
    """Environment running Codex with a fresh ``CODEX_HOME`` whose config adds the proxy as a provider.

    The provider speaks the Responses API (``wire_api = "responses"``) at ``openai_base_url`` and reads
    its key from ``AGL_API_KEY``; the model and every other setting stay Codex's defaults.
    """
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        'model_provider = "agl"\n\n'
        "[model_providers.agl]\n"
        'name = "agl LLM proxy"\n'
        f"base_url = {_toml_string(openai_base_url)}\n"
        'env_key = "AGL_API_KEY"\n'
        'wire_api = "responses"\n'
    )
    return {**_base_env(home), "CODEX_HOME": str(codex_home), "AGL_API_KEY": api_key}


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
