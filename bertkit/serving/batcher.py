"""Micro-batching: concurrent requests are run together as one model batch.

Each request's examples wait at most ``max_wait_s`` for company; a batch closes earlier once it
holds ``max_rows`` examples. The model runs on one worker thread, so the event loop keeps
accepting requests meanwhile, and each request gets back exactly its own rows, in order.
Rows are validated before they join a batch; should a batch still fail, each of its requests is
run again alone, so that only the one that cannot be served gets an error.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from bertkit.options import INFERENCE_BATCH


class MicroBatcher:
    def __init__(self, run, max_rows: int = INFERENCE_BATCH, max_wait_s: float = 0.005):
        self.run, self.max_rows, self.max_wait_s = run, max_rows, max_wait_s
        self.queue: asyncio.Queue | None = None
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bertkit-model")
        self.stats = {"requests": 0, "batches": 0, "rows": 0, "largest_batch_requests": 0}
        self._worker: asyncio.Task | None = None

    def start(self) -> None:
        self.queue = asyncio.Queue()
        self._worker = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
        self.executor.shutdown(wait=False, cancel_futures=True)

    async def submit(self, examples: list) -> list:
        future = asyncio.get_running_loop().create_future()
        await self.queue.put((examples, future))
        return await future

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self.queue.get()]
            rows = len(batch[0][0])
            deadline = loop.time() + self.max_wait_s
            while rows < self.max_rows:
                left = deadline - loop.time()
                if left <= 0:
                    break
                try:
                    item = await asyncio.wait_for(self.queue.get(), left)
                except asyncio.TimeoutError:
                    break
                batch.append(item)
                rows += len(item[0])
            examples = [example for request, _ in batch for example in request]
            try:
                results = await loop.run_in_executor(self.executor, self.run, examples)
            except Exception:  # noqa: BLE001 (each request is retried alone, and fails alone)
                for request, future in batch:
                    await self._run_alone(request, future)
            else:
                start = 0
                for request, future in batch:
                    if not future.done():  # a client that went away cancelled its future
                        future.set_result(results[start : start + len(request)])
                    start += len(request)
            self.stats["requests"] += len(batch)
            self.stats["batches"] += 1
            self.stats["rows"] += len(examples)
            self.stats["largest_batch_requests"] = max(self.stats["largest_batch_requests"], len(batch))

    async def _run_alone(self, examples: list, future: asyncio.Future) -> None:
        if future.done():
            return
        try:
            rows = await asyncio.get_running_loop().run_in_executor(self.executor, self.run, examples)
        except Exception as exc:  # noqa: BLE001 (handed to the request that caused it)
            if not future.done():
                future.set_exception(exc)
        else:
            if not future.done():
                future.set_result(rows)
