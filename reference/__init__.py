"""The reference system the simulator drives: an agent that persists turns and compacts its context.

`reference.store` is the SQLite session store; the rest is the host side (agent, pool, host wait) and the
compactor (lease, commit fence, attempt generations), written against the `Runtime` API only.
"""
