"""OpenAI Responses and Anthropic Messages clients answered by the agl LLM proxy's chat-completions backends.

Installed, it serves ``POST /v1/responses`` and ``POST /v1/messages`` of :class:`agl_core.llm_proxy.LLMProxy`
(without it those routes answer 501): each request is translated to a chat request, which goes to the
backend and is recorded, and the answer (buffered or streamed) is translated back. See docs/llm-proxy.md.
"""

from agl_proxy_translate.answer import CLIENT_APIS, ClientApiSpec
from agl_proxy_translate.translation import Translation

__all__ = ["CLIENT_APIS", "ClientApiSpec", "Translation"]
