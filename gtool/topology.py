"""Where the ranks of a run sit: how many share a node, the memory they share there, and the order that
lays the grid's axes over them.

Declared once for `gtool plan` and `gtool train`. Launchers number a node's ranks consecutively, so with n
ranks per node the placement's innermost axes are the ones whose groups stay inside a node
(gtool.geometry.grid.ProcessGrid.spans_nodes).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from gtool.geometry.grid import PLACEMENTS
from gtool.options import Options, option
from gtool.units import byte_count

LOCAL_SIZE_VARIABLES = ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE")
"""Where torchrun and srun say how many ranks they start on each node."""


@dataclass(frozen=True)
class Topology(Options):
    """How many ranks share a node, the memory they may use there, and, for an explicit grid, how its axes
    are laid over the ranks."""

    gpus_per_node: int | None = option(
        None,
        "Ranks (GPUs) per node, for pricing groups across nodes (gtool plan, --grid auto); default: "
        "torchrun's LOCAL_WORLD_SIZE or srun's SLURM_NTASKS_PER_NODE, else every rank on one node.",
        minimum=1,
        aliases=("--ranks-per-node",),
    )
    placement: str | None = option(
        None,
        "The grid's axes from innermost (inside a node) out, e.g. yxz; default zyx for --grid GXxGYxGZ, "
        "the plan's for --grid auto.",
        choices=PLACEMENTS,
    )
    memory_limit: int | None = option(
        None,
        "Memory of the run's ranks on one node together, e.g. 16GB: a full-graph run over it is refused "
        "before any rank starts; a mini-batch run reads its features from the store per step when they "
        "do not fit (ranks on the CPU: GPU memory is not counted).",
        positive=True,
        parse=byte_count,
        metavar="SIZE",
        shown_default="this machine's memory (its cgroup's limit, if any); gtool plan --gpus-per-node: none",
    )

    def ranks_per_node(self, ranks: int, environment: Mapping[str, str] | None = None) -> int:
        """Ranks on one node of a run of `ranks`: --gpus-per-node, else the launcher's, else all."""
        per_node = self.gpus_per_node or launcher_ranks_per_node(environment) or ranks
        return min(ranks, per_node)


def launcher_ranks_per_node(environment: Mapping[str, str] | None = None) -> int | None:
    """The ranks per node torchrun or srun started (srun writes e.g. '4' or '4(x2)'), or None."""
    environment = os.environ if environment is None else environment
    for name in LOCAL_SIZE_VARIABLES:
        found = re.match(r"\d+", environment.get(name, ""))
        if found and int(found.group()) > 0:
            return int(found.group())
    return None
