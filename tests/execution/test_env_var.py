"""`agl_core.env_var`: override, then environment, then fallback; clear errors for bad values."""

from __future__ import annotations

import pytest

from agl_core.env_var import LightningEnvVar, resolve_bool_env_var, resolve_int_env_var, resolve_str_env_var

VAR = LightningEnvVar.AGL_MANAGED_STORE


def test_the_enum_names_the_variables() -> None:
    assert {v.value for v in LightningEnvVar} == {
        "AGL_EMITTER_DEBUG",
        "AGL_MANAGED_STORE",
        "AGL_CURRENT_ROLE",
        "AGL_SERVER_HOST",
        "AGL_SERVER_PORT",
    }


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1", True),
        ("TRUE", True),
        (" yes ", True),
        ("On", True),
        ("0", False),
        ("false", False),
        ("NO", False),
        ("off", False),
    ],
)
def test_booleans_accept_the_usual_spellings(
    raw: str, expected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(VAR.value, raw)
    assert resolve_bool_env_var(VAR) is expected


def test_override_wins_then_environment_then_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VAR.value, raising=False)
    assert resolve_bool_env_var(VAR) is None
    assert resolve_bool_env_var(VAR, fallback=True) is True
    monkeypatch.setenv(VAR.value, "false")
    assert resolve_bool_env_var(VAR, fallback=True) is False
    assert resolve_bool_env_var(VAR, override=True, fallback=False) is True
    monkeypatch.setenv(VAR.value, "  ")
    assert resolve_bool_env_var(VAR, fallback=True) is True  # blank counts as unset


def test_a_bad_boolean_names_the_variable_and_the_accepted_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VAR.value, "maybe")
    with pytest.raises(ValueError, match="AGL_MANAGED_STORE must be one of 1, true, yes, on"):
        resolve_bool_env_var(VAR)


def test_integers_and_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    port = LightningEnvVar.AGL_SERVER_PORT
    monkeypatch.setenv(port.value, " 4848 ")
    assert resolve_int_env_var(port, fallback=1) == 4848
    assert resolve_int_env_var(port, override=7) == 7
    monkeypatch.setenv(port.value, "48x")
    with pytest.raises(ValueError, match="AGL_SERVER_PORT must be an integer"):
        resolve_int_env_var(port)
    host = LightningEnvVar.AGL_SERVER_HOST
    monkeypatch.delenv(host.value, raising=False)
    assert resolve_str_env_var(host, fallback="localhost") == "localhost"
    monkeypatch.setenv(host.value, "example.org")
    assert resolve_str_env_var(host, fallback="localhost") == "example.org"
    assert resolve_str_env_var("AGL_SERVER_HOST", override="x") == "x"
