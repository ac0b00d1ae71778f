"""The fault catalogue: one module per kind. `FAULT_KINDS` maps each kind's name to its class."""

from faults.base import Fault
from faults.crash import Crash
from faults.crash_in_transaction import CrashInTransaction
from faults.ctrl_c import CtrlC
from faults.db_busy import DbBusy
from faults.db_read_failure import DbReadFailure
from faults.db_write_failure import DbWriteFailure
from faults.host_interrupt import HostInterrupt
from faults.late_worker import LateWorker
from faults.lease_expiry import LeaseExpiry
from faults.message_mid_compression import MessageMidCompression
from faults.provider_error import ProviderError
from faults.second_process import SecondProcess
from faults.stall import Stall
from faults.unleased_rotation import UnleasedRotation

FAULT_KINDS: dict[str, type[Fault]] = {
    kind.kind: kind
    for kind in (
        Stall, LateWorker, ProviderError, LeaseExpiry, DbWriteFailure, DbReadFailure, DbBusy, CtrlC, Crash, SecondProcess,
        MessageMidCompression, HostInterrupt, UnleasedRotation, CrashInTransaction,
    )
}
