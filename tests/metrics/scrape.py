"""Scrape a ``/metrics`` endpoint and parse it with prometheus_client's own parser."""

from __future__ import annotations

import aiohttp
from prometheus_client.parser import text_string_to_metric_families


async def scrape(
    session: aiohttp.ClientSession, url: str, token: str | None = None
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample at `url` as ``{(name, sorted labels): value}``; asserts the Prometheus content type."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with session.get(url, headers=headers) as response:
        assert response.status == 200, await response.text()
        assert response.headers["Content-Type"].startswith("text/plain; version=")
        text = await response.text()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    """The value of one sample (KeyError naming the sample when it is missing)."""
    key = (name, tuple(sorted(labels.items())))
    if key not in samples:
        have = sorted(str(dict(k[1])) for k in samples if k[0] == name)[:20]
        raise KeyError(f"no sample {name}{labels}; some it has: {have}")
    return samples[key]
