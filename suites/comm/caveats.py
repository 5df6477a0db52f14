"""What a row of comm says where its figure differs from nccl-tests' for a known reason (its ``message``)."""

from __future__ import annotations

from gpubench.backends.base import Backend

# Below this, torch.distributed's captured point-to-point call reads under nccl-tests' sendrecv by a per-call cost
# of its own (2 x H100 and 4 x H100, 2026-11-27: 0.88-0.92 at 1 MiB, 0.91-0.96 at 4 MiB, 0.93 at 8 MiB, 0.98-1.00 at
# 16 MiB; docs/comm.md).
P2P_OWN_COST_BELOW = 16 << 20
P2P_NOTE = ("torch.distributed's batch_isend_irecv costs more per call than NCCL's own send/recv on the same "
            "buffers below 16 MiB, in graphs too, so this reads under nccl-tests (docs/comm.md, sendrecv below "
            "16 MiB): --engine nccl-tests gives NCCL's own figure")
# From there up to this, captured sendrecv reads a few percent under nccl-tests' threads (4 x H100, 2026-11-28:
# 0.95-0.97 at 16 MiB, 0.945-0.948 at 32, 0.97 at 64), and NCCL's own send/recv from one process per GPU reads what
# torch's call reads (0.99-1.03 of it at 32 MiB, 1.00 at 64); each buffer in an allocation of its own changes
# nothing (0.996-1.017). What is left is the layout: nccl-tests' threads share one process, torch a process per GPU.
P2P_LAYOUT_UP_TO = 64 << 20
P2P_LAYOUT_NOTE = ("NCCL's own send/recv from one process per GPU reads what torch.distributed reads here, a few "
                   "percent under nccl-tests' threads of one process (docs/comm.md, sendrecv from 16 to 64 MiB): the "
                   "process layout, not the call")
# From here, alltoall in graphs reads one of several speeds per run, within a run to 1 %, between runs up to 11 %
# apart, nccl-tests' alltoall_perf as much as this (4 x H200, 2026-11-28: 256 MiB 583.5-651.5 us against 593.4-658.7
# over three rounds; 4 x H100, 2026-11-27: nccl-tests at 64 MiB 284.4-316.9 GB/s over five rounds). One run's figure
# there is one draw: the row says so, and compare judges it over runs.
ALLTOALL_RUNS_FROM = 64 << 20
ALLTOALL_RUNS_NOTE = ("alltoall from 64 MiB reads one of several speeds per run, up to 11 % apart, in nccl-tests as "
                      "here (docs/comm.md, alltoall from 64 MiB): judge it over several runs")


def graph_note(collective: str, nbytes: int, graph: bool, backend: Backend) -> str:
    """What a row timed in a graph says of a cost torch.distributed adds (P2P_NOTE), of its one process per GPU
    (P2P_LAYOUT_NOTE) or of a figure that moves between runs (ALLTOALL_RUNS_NOTE); a capture that fails says that
    instead (gpubench.timing.graphs)."""
    if not graph or backend.graphs() is None:
        return ""
    if collective == "alltoall":
        return ALLTOALL_RUNS_NOTE if nbytes >= ALLTOALL_RUNS_FROM else ""
    if collective != "sendrecv":
        return ""
    if nbytes < P2P_OWN_COST_BELOW:
        return P2P_NOTE
    return P2P_LAYOUT_NOTE if nbytes <= P2P_LAYOUT_UP_TO else ""

