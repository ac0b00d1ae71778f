"""The contract between the reference, the faults and the harness.

Everything the three parts exchange is declared here, once, as types: the `Runtime` protocol the reference
is written against (`contract.runtime`), one frozen dataclass per event kind it records (`contract.events`),
the named points where faults act (`contract.points`), the ids it mints (`contract.ids`) and the parameters
a fault kind takes (`contract.params`). This package imports none of `reference`, `faults` or `sim`; they
all import it. `contract.trio_runtime` is the `Runtime` on trio, the one the reference runs on for real.
"""
