"""The asyncio facade never blocks the loop and returns what the sync API returns."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from mempager import PagerConfig
from mempager.aio import AsyncPager


def test_async_pager_round_trip_and_concurrency(store_path: Path) -> None:
    async def main() -> None:
        async with await AsyncPager.open(store_path, actor="neo", config=PagerConfig(embedder="hash")) as p:
            uris = await asyncio.gather(*(p.remember_fact(f"async fact {i}") for i in range(20)))
            assert len(set(uris)) == 20
            assert await p.sync(timeout=30)
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                end = time.monotonic() + 0.3
                while time.monotonic() < end:
                    ticks += 1
                    await asyncio.sleep(0.01)

            results = await asyncio.gather(ticker(), *(p.retrieve("async fact", k=5) for _ in range(20)))
            assert ticks > 5  # the loop kept running while retrievals ran in threads
            assert all(len(r) == 5 for r in results[1:])
            page = await p.page("async fact 3", goal="goal")
            assert "async fact 3" in page.render()
            await p.forget(uris[0])
            assert all(m.uri != uris[0] for m in await p.recall(limit=100))

    asyncio.run(main())
