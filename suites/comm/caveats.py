"""What a row of comm says where its figure differs from nccl-tests' for a known reason (its ``message``)."""

from __future__ import annotations

from gpubench.toolkit import Backend

# Below this, torch.distributed's captured point-to-point call costs more per call than NCCL's own (docs/comm.md,
# "sendrecv below 16 MiB"; docs/measurements.md, comm).
P2P_OWN_COST_BELOW = 16 << 20
P2P_NOTE = ("torch.distributed's batch_isend_irecv costs more per call than NCCL's own send/recv on the same "
            "buffers below 16 MiB, in graphs too, so this reads under nccl-tests (docs/comm.md, sendrecv below "
            "16 MiB): --engine nccl-tests gives NCCL's own figure")
# Up to this, captured sendrecv reads a few percent under nccl-tests' threads: the process layout, not the call
# nor the buffers (docs/comm.md, "sendrecv from 16 to 64 MiB"; results/reference/h100x4/sendrecv-layout-20261128/).
P2P_LAYOUT_UP_TO = 64 << 20
P2P_LAYOUT_NOTE = ("NCCL's own send/recv from one process per GPU reads what torch.distributed reads here, a few "
                   "percent under nccl-tests' threads of one process (docs/comm.md, sendrecv from 16 to 64 MiB): the "
                   "process layout, not the call")
# From here alltoall reads one of several speeds per run, in nccl-tests too: one run's figure is one draw, judged
# over runs (docs/comm.md, "alltoall from 64 MiB").
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

