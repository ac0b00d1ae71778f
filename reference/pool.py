"""The process-wide compression pool: bounded admission that fails fast, and the worker slots.

An admitted job owns its admission slot until it finishes (not the host that submitted it), so a host that
gives up cannot free a slot a still-running worker occupies.
"""

from __future__ import annotations

from contract.events import PoolSaturated
from contract.runtime import Runtime


class CompressionPool:
    def __init__(self, rt: Runtime, cap: int, *, workers: int | None = None) -> None:
        self._rt = rt
        self.cap = cap
        self.admitted = 0
        self._workers = rt.semaphore(workers if workers is not None else cap)

    def try_admit(self) -> bool:
        """Take an admission slot, or refuse at once: the conversation continues uncompressed."""
        # FIX pool-fail-fast (R8): past the cap a job would queue and could start long after its host gave up
        if self.admitted >= self.cap:
            self._rt.emit(PoolSaturated(admitted=self.admitted, cap=self.cap))
            return False
        self.admitted += 1
        return True

    def release_admission(self) -> None:
        self.admitted -= 1

    async def acquire_worker(self) -> None:
        await self._workers.acquire()

    def release_worker(self) -> None:
        self._workers.release()
