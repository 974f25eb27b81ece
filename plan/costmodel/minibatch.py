"""Mini-batch runs (`gtool train --batch-size B --data-parallel D`): their steps' shapes and collectives.

A step multiplies each layer by its sampled blocks, so the 3D collectives of gtool.geometry.collectives
have the sample's member counts in a rank's bands as their rows (`SampledShape`); weights are as in
full-graph training. Each step adds an all-reduce of the sample's training-node counts (3 float64) in the
last layer's row-axis group, and D replicas add one all-reduce per owned parameter part per round (group
`data`). To rank layouts the planner takes the expected member counts (B/N of a band's real rows, rounded
up); `replay_comm_bytes` replays an epoch's samples and gives every rank's exact bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gtool.architecture import ModelConfig
from gtool.geometry.bands import ceil_div
from gtool.geometry.collectives import DATA_AXIS, Collective, bytes_by_group, epoch_collectives
from gtool.geometry.epochs import EpochSchedule, epoch_rounds, epoch_steps
from gtool.geometry.grid import ProcessGrid
from gtool.geometry.layers import order_of_layer_output
from gtool.geometry.shapes import GCN_PARTS, LayerShape, StackParts
from gtool.plan.costmodel.cost import EpochTime, epoch_time
from gtool.plan.costmodel.memory import epoch_timeline, parameter_elements, parameter_parts
from gtool.plan.costmodel.profile import DeviceProfile
from gtool.store.reader import Store

COUNTS = 3
"""The training, validation and test node counts of a sample, all-reduced every step (float64)."""


@dataclass(frozen=True)
class SampledShape(LayerShape):
    """A layer's shapes in one step: `sampled_rows` members in its row band, `sampled_inputs` in its
    input band (the feature, class and weight bands are as in full-graph training)."""

    sampled_rows: int = 0
    sampled_inputs: int = 0

    @property
    def rows(self) -> int:
        return self.sampled_rows

    @property
    def inputs(self) -> int:
        return self.sampled_inputs

    @property
    def real_rows(self) -> int:
        return self.sampled_rows


def sampled_shapes(shapes: list[LayerShape], rows: list[int], inputs: list[int]) -> list[LayerShape]:
    """`shapes` with each layer's member counts."""
    return [
        SampledShape(s.geometry, s.in_dim, s.out_dim, r, i)
        for s, r, i in zip(shapes, rows, inputs, strict=True)
    ]


def expected_shapes(shapes: list[LayerShape], num_nodes: int, batch_size: int) -> list[LayerShape]:
    """The shapes of a typical step: B/N of each band's real rows (rank 0's bands), rounded up."""
    rows = [ceil_div(s.geometry.rows.real * batch_size, num_nodes) for s in shapes]
    inputs = [ceil_div(s.geometry.inputs.real * batch_size, num_nodes) for s in shapes]
    return sampled_shapes(shapes, rows, inputs)


def step_collectives(
    shapes: list[LayerShape], wire_itemsize: int | None = None, parts: StackParts = GCN_PARTS
) -> list[Collective]:
    """Every collective of one step on a rank whose member counts `shapes` hold (groups of 2 and more);
    `wire_itemsize` and `parts` as in epoch_collectives (--comm-dtype bf16, the model's components)."""
    last = shapes[-1]
    rows = parts.output_axes(last)[0]
    counts = Collective(
        last.layer, "loss", "sample counts", "all_reduce", rows, last.geometry.size(rows), COUNTS, 8
    )
    steps = epoch_collectives(shapes, False, wire_itemsize, parts)
    return steps + ([counts] if counts.group_size > 1 else [])


def replica_collectives(
    shapes: list[LayerShape], replicas: int, parts: StackParts = GCN_PARTS
) -> list[Collective]:
    """The all-reduce of every owned parameter part's gradient over the replicas, once per round."""
    if replicas < 2:
        return []
    layer = shapes[-1].layer
    return [
        Collective(layer, "backward", "parameter parts", "all_reduce", DATA_AXIS, replicas, elements)
        for elements in parameter_parts(shapes, parts)
    ]


@dataclass(frozen=True)
class MiniBatchRun:
    """A mini-batch run to price: samples of `batch_size` of the `num_nodes` nodes, `replicas` replicas."""

    num_nodes: int
    batch_size: int
    replicas: int

    @property
    def rounds(self) -> int:
        """Rounds of steps per epoch (one step per replica a round)."""
        return epoch_rounds(self.num_nodes, self.batch_size, self.replicas)

    @property
    def last_round_size(self) -> int:
        """The largest sample of the last round: B, unless the round is the short last step alone."""
        steps = epoch_steps(self.num_nodes, self.batch_size)
        alone = steps - (self.rounds - 1) * self.replicas == 1
        return self.num_nodes - (steps - 1) * self.batch_size if alone else self.batch_size

    def epoch(
        self,
        shapes: list[LayerShape],
        nnz: np.ndarray,
        model: ModelConfig,
        profile: DeviceProfile,
        ranks_per_node: int,
        classes: int,
        spanning: tuple[bool, ...] = (False, False, False, False),
        parts: StackParts = GCN_PARTS,
    ) -> tuple[list[Collective], EpochTime]:
        """The collectives and seconds of an epoch of typical steps: rounds of steps of B nodes, the last
        one at its largest sample (the short last step, when alone in it, is priced at its size);
        `spanning`: whether the groups of the x, y, z axes and of the replicas span nodes."""

        def step(size: int) -> tuple[list[Collective], EpochTime]:
            """A step of `size` nodes: (size/N)^2 of every shard's nonzeros (the entries between two
            members) multiplied by blocks of the expected member counts."""
            step_shapes = expected_shapes(shapes, self.num_nodes, size)
            step_nnz = np.ceil(nnz * (size / self.num_nodes) ** 2).astype(np.int64)
            collectives = step_collectives(step_shapes, model.wire_itemsize, parts)
            collectives += replica_collectives(shapes, self.replicas, parts)
            allocated = epoch_timeline(step_shapes, model, classes, parts).allocated
            parameters = parameter_elements(shapes, model, parts)
            seconds = epoch_time(
                step_shapes,
                step_nnz,
                collectives,
                profile,
                model,
                parameters,
                ranks_per_node,
                allocated,
                spanning,
                parts,
            )
            return collectives, seconds

        (collectives, typical), (last_collectives, last) = step(self.batch_size), step(self.last_round_size)
        full = self.rounds - 1
        time = EpochTime(
            typical.spmm * full + last.spmm,
            typical.dense * full + last.dense,
            typical.comm * full + last.comm,
            typical.overhead * full + last.overhead,
        )
        return collectives * full + last_collectives, time


def _band_members(positions: np.ndarray, band_size: int, bands: int) -> np.ndarray:
    """Members per band of a sample whose stored positions are `positions`."""
    return np.bincount(positions // band_size, minlength=bands)


def replay_comm_bytes(
    store: Store,
    model: ModelConfig,
    grid: ProcessGrid,
    replicas: int,
    batch_size: int,
    samples: np.ndarray,
) -> list[dict[str, dict[str, int]]]:
    """Every world rank's collective bytes in a mini-batch epoch of `model` whose node order is `samples`
    (the trainer's draw, gtool.trainer.minibatch.schedule), by group and kind (what `gtool train --log`
    records), from the epoch's steps replayed with each rank's member counts (exact, residuals included)."""
    n = store.num_nodes
    itemsize, wire_itemsize = model.itemsize, model.wire_itemsize
    inverse = {}
    for order in ("r", "c"):
        perm = store.perm(order if store.two_matrices else "r")
        inverse[order] = np.empty(n, dtype=np.int64)
        inverse[order][perm] = np.arange(n)
    schedule = EpochSchedule(n, batch_size, replicas)
    stacks = [model.shapes(grid, n, store.num_features, store.num_classes, rank) for rank in range(grid.size)]
    result = []
    for replica in range(replicas):
        steps = [schedule.step_of(r, replica) for r in range(schedule.rounds)]
        members = []
        for step in steps:
            if step is None:
                continue
            sample = samples[step * batch_size : (step + 1) * batch_size]
            members.append({o: inverse[o][sample] for o in ("r", "c")})
        for rank in range(grid.size):
            shapes, parts = stacks[rank]
            collectives = replica_collectives(shapes, replicas, parts) * len(steps)
            for positions in members:
                rows, inputs = [], []
                for g in (s.geometry for s in shapes):
                    row_order = order_of_layer_output(g.layer)
                    input_order = "c" if row_order == "r" else "r"
                    row_bands = g.size(g.row_axis)
                    rows.append(_band_members(positions[row_order], g.rows.size, row_bands)[g.rows.index])
                    inputs.append(
                        _band_members(positions[input_order], g.inputs.size, g.sizes[1])[g.inputs.index]
                    )
                sampled = sampled_shapes(shapes, rows, inputs)
                collectives += step_collectives(sampled, wire_itemsize, parts)
            result.append(bytes_by_group(collectives, itemsize))
    return result
