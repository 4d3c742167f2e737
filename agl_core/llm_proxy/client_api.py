"""What the proxy needs from a client API it answers through chat backends (`/v1/responses`, `/v1/messages`).

The translations live in the ``agl-proxy-translate`` distribution (package ``agl_proxy_translate``). Without
it, those routes answer 501 with the ``pip install`` line; chat completions and completions need nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

from agl_core.llm_proxy.errors import ProxyHTTPError

if TYPE_CHECKING:
    from aiohttp import web

    from agl_core.llm_proxy.backends import BackendPool
    from agl_core.llm_proxy.forward import ForwardContext
    from agl_core.llm_proxy.recording import Exchange

__all__ = ["TRANSLATE_DISTRIBUTION", "ClientApi", "TranslationNotes", "load_client_api"]

TRANSLATE_DISTRIBUTION = "agl-proxy-translate"
"""The distribution that translates Responses and Messages requests to chat completions."""

_TRANSLATE_PACKAGE = "agl_proxy_translate"


class TranslationNotes(Protocol):
    """What one translation noted about its request; the proxy records :attr:`dropped`."""

    dropped: list[str]


class ClientApi(Protocol):
    """One client API answered through chat-completions backends."""

    @property
    def name(self) -> str:
        """Recorded as ``agl.llm.client_api`` (``"openai.responses"``)."""
        ...

    def new_notes(self, refuse_hosted_tools: bool) -> TranslationNotes:
        """Fresh notes for one request."""
        ...

    def to_chat(self, payload: Mapping[str, Any], notes: TranslationNotes) -> dict[str, Any]:
        """The chat request for ``payload``; raises `ProxyHTTPError` for a request it cannot carry."""
        ...

    def error_response(self, exc: ProxyHTTPError) -> web.Response:
        """``exc`` in this API's error shape."""
        ...

    async def answer(
        self,
        request: web.Request,
        ctx: ForwardContext,
        pool: BackendPool,
        original: dict[str, Any],
        payload: dict[str, Any],
        raw: bytes,
        exchange: Exchange | None,
        notes: TranslationNotes,
    ) -> web.StreamResponse:
        """Send the chat ``payload`` to ``pool`` and answer the agent in this API."""
        ...


def load_client_api(route: str) -> ClientApi:
    """The translation behind ``POST /v1/<route>``; 501 naming the distribution when it is not installed."""
    try:
        import agl_proxy_translate  # a fixed name: nothing from the request picks what is imported
    except ModuleNotFoundError as exc:
        if exc.name != _TRANSLATE_PACKAGE:
            raise
        raise ProxyHTTPError(
            501,
            f"POST /v1/{route} is answered through chat-completions backends by the {TRANSLATE_DISTRIBUTION} "
            f"plugin, which is not installed: pip install {TRANSLATE_DISTRIBUTION}",
            code="not_implemented",
        ) from None
    # each translation takes back only the notes its own new_notes made, hence the cast
    return cast("ClientApi", agl_proxy_translate.CLIENT_APIS[route])
