"""`CachedStaticFiles`: serve one folder's files over aiohttp; content-hashed names are cached for a year.

A file whose name carries a content hash (``app-3f9a1b2c.js``, ``index.BXz1Y2aQ.css``: a last ``-`` or
``.`` part before the extension of 8 or more letters, digits, ``_`` or ``-``, with at least one digit)
changes name whenever it changes, so browsers may keep it for good: ``Cache-Control: public,
max-age=31536000, immutable``. Every other file gets ``no-cache`` (use it only after revalidating); each
answer has an ``ETag`` and ``Last-Modified``, so a revalidation of an unchanged file is a bodiless 304.
"""

from __future__ import annotations

import mimetypes
import os
import re
from collections.abc import Mapping
from pathlib import Path

from aiohttp import web

__all__ = ["IMMUTABLE", "REVALIDATE", "CachedStaticFiles", "is_content_hashed"]

IMMUTABLE = "public, max-age=31536000, immutable"
"""``Cache-Control`` of content-hashed files (as Agent Lightning 0.3's dashboard assets)."""

REVALIDATE = "no-cache"
"""``Cache-Control`` of every other file."""

_HASHED = re.compile(r"^.+[.-](?P<hash>[A-Za-z0-9_-]{8,})\.[A-Za-z0-9]+$")

_TEXT_TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css", ".html": "text/html"}


def is_content_hashed(name: str) -> bool:
    """Whether the file name (its last path part) carries a content hash (see the module docstring)."""
    match = _HASHED.match(name.rsplit("/", 1)[-1])
    return match is not None and any(char.isdigit() for char in match["hash"])


class CachedStaticFiles:
    """The files under ``directory``, as aiohttp answers with caching headers (0.3's name, for aiohttp).

    `handle` is the handler of a route with a ``{name}`` part
    (``router.add_get("/assets/{name:.+}", CachedStaticFiles("dist/assets").handle)``); or call
    `file_response` from your own handler. ``headers`` are added to every answer (e.g. a
    Content-Security-Policy).

    Agent Lightning 0.3's class was a Starlette ``StaticFiles`` that marked every file immutable (its
    dashboard build hashed every asset name); agl's marks only content-hashed names, so files with
    stable names are never served stale.
    """

    def __init__(
        self, directory: str | os.PathLike[str], *, headers: Mapping[str, str] | None = None
    ) -> None:
        self.directory = Path(directory).resolve()
        self.headers: dict[str, str] = dict(headers or {})

    def path_of(self, name: str) -> Path:
        """The file ``name`` (relative, ``/``-separated) under the folder.

        Raises:
            FileNotFoundError: no such file, or a name that leaves the folder.
        """
        path = (self.directory / name).resolve()
        if self.directory not in path.parents or not path.is_file():
            raise FileNotFoundError(f"No file {name!r} in {self.directory}.")
        return path

    @staticmethod
    def cache_control(name: str) -> str:
        """`IMMUTABLE` for a content-hashed name, else `REVALIDATE`."""
        return IMMUTABLE if is_content_hashed(name) else REVALIDATE

    def file_response(self, name: str) -> web.FileResponse:
        """The answer for the file ``name``: its bytes with type, caching and the extra headers.

        Raises:
            FileNotFoundError: as `path_of`.
        """
        path = self.path_of(name)
        text_type = _TEXT_TYPES.get(path.suffix)
        content_type = f"{text_type}; charset=utf-8" if text_type else mimetypes.guess_type(path.name)[0]
        headers = {**self.headers, "Cache-Control": self.cache_control(name)}
        headers["Content-Type"] = content_type or "application/octet-stream"
        return web.FileResponse(path, headers=headers)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Handle ``GET``/``HEAD`` of the route's ``{name}``; a missing file is a JSON 404."""
        name = request.match_info["name"]
        try:
            return self.file_response(name)
        except FileNotFoundError:
            error = {"type": "RouteNotFound", "message": f"No file {name!r} here.", "details": {}}
            return web.json_response({"error": error}, status=404)
