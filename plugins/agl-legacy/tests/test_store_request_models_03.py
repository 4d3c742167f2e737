"""A hand-written 0.3 HTTP client: bodies built from ``store.client_server``'s request models."""

from __future__ import annotations

import agl_core as agl


async def test_raw_http_client_with_03_request_models() -> None:
    import aiohttp

    from agl_core.store.client_server import (
        API_V1_AGL_PREFIX,
        DequeueManyRolloutsRequest,
        NextSequenceIdRequest,
        NextSequenceIdResponse,
        QueryRolloutsRequest,
        RolloutRequest,
    )

    server = agl.LightningStoreServer(agl.InMemoryLightningStore(), "127.0.0.1", 0)
    await server.start()
    base = server.endpoint + API_V1_AGL_PREFIX
    try:
        async with aiohttp.ClientSession() as http:

            async def post(path: str, body: object) -> object:
                async with http.post(base + path, json=body) as response:
                    assert response.status < 300, await response.text()
                    return await response.json()

            started = await post(
                "/rollouts", RolloutRequest(input={"q": 1}, mode="train").model_dump(mode="json")
            )
            rollout_id = started["rollout_id"]  # type: ignore[index]
            await post("/queues/rollouts/enqueue", {"rollouts": [{"input": {"q": 2}}]})
            claimed = await post("/queues/rollouts/dequeue", DequeueManyRolloutsRequest(limit=5).model_dump())
            assert len(claimed) == 1  # type: ignore[arg-type]
            found = await post(
                "/rollouts/search", QueryRolloutsRequest(rollout_id_in=[rollout_id]).model_dump()
            )
            assert [r["rollout_id"] for r in found["items"]] == [rollout_id]  # type: ignore[index]
            issued = await post(
                "/spans/next", NextSequenceIdRequest(rollout_id=rollout_id, attempt_id="a").model_dump()
            )
            assert NextSequenceIdResponse.model_validate(issued).sequence_id == 1
    finally:
        await server.stop()
