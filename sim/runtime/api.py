"""The runtime API the simulator implements; declared in `contract.runtime`, shared with the reference."""

from contract.runtime import (
    BarrierLike,
    CancelScopeLike,
    ConditionLike,
    EventLike,
    LockLike,
    NurseryLike,
    RandomLike,
    ReceiveChannelLike,
    ResettableEventLike,
    Runtime,
    SemaphoreLike,
    SendChannelLike,
)

__all__ = [
    "BarrierLike", "CancelScopeLike", "ConditionLike", "EventLike", "LockLike", "NurseryLike", "RandomLike",
    "ReceiveChannelLike", "ResettableEventLike", "Runtime", "SemaphoreLike", "SendChannelLike",
]
