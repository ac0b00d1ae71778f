"""The runtime API the simulator implements; declared in `contract.runtime`, shared with the reference."""

from contract.runtime import (
    CancelScopeLike,
    EventLike,
    LockLike,
    NurseryLike,
    RandomLike,
    ReceiveChannelLike,
    Runtime,
    SemaphoreLike,
    SendChannelLike,
)

__all__ = [
    "CancelScopeLike", "EventLike", "LockLike", "NurseryLike", "RandomLike", "ReceiveChannelLike", "Runtime",
    "SemaphoreLike", "SendChannelLike",
]
