"""The store's wire stays byte-compatible: the generated OpenAPI document equals the kept golden copy.

A change to a route, a body, an answer or an error shape shows here as a diff. When the change is
meant (a new route, say), regenerate the copy and review the diff in the commit::

    python -c "import json; from agl_core.store.http.openapi import openapi_document as d; \
print(json.dumps(d(), indent=1, sort_keys=True))" > tests/store/http/openapi_golden.json
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

from agl_core.store.http.openapi import openapi_document

GOLDEN = Path(__file__).with_name("openapi_golden.json")


def test_the_openapi_document_matches_the_golden_copy() -> None:
    now = json.dumps(openapi_document(), indent=1, sort_keys=True) + "\n"
    kept = GOLDEN.read_text(encoding="utf-8")
    if now != kept:
        diff = "".join(
            difflib.unified_diff(kept.splitlines(True), now.splitlines(True), "golden", "generated", n=2)
        )
        raise AssertionError(f"The store's OpenAPI document changed:\n{diff[:6000]}")
