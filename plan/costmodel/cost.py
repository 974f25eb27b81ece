"""Predicted seconds of one training epoch on every rank of a grid, from shapes, nonzeros and a profile.

Per layer, each rank's SpMM, dense products and fresh tensors' page faults (scaled by the profile's
factors for k ranks side by side), the slowest rank's sum counting, plus every collective's latency and
ring wire bytes (inter-node rows where the grid's placement spreads a group over nodes) and a fixed cost
per layer. The formulas, and what each term stands for: docs/plan.md, The model, Time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gtool.architecture import ModelConfig
from gtool.geometry.collectives import Collective
from gtool.geometry.shapes import GCN_PARTS, LayerShape, StackParts
from gtool.plan.costmodel.memory import Allocation
from gtool.plan.costmodel.profile import DeviceProfile

LOSS_PASSES = 12
ADAM_PASSES = 12


@dataclass(frozen=True)
class EpochTime:
    """Seconds per rank and layer ([rank, layer] arrays) and of the collectives."""

    spmm: np.ndarray
    dense: np.ndarray
    comm: float
    overhead: float = 0.0

    @property
    def compute(self) -> np.ndarray:
        return self.spmm + self.dense

    @property
    def total(self) -> float:
        """The epoch: per layer the slowest rank's computation, plus all communication and overhead."""
        return float(self.compute.max(axis=0).sum()) + self.comm + self.overhead

    @property
    def slowest_rank(self) -> int:
        return int(self.compute.sum(axis=1).argmax())


def _layer_dense(
    shape: LayerShape, profile: DeviceProfile, m: ModelConfig, last: bool, projected: bool = False
) -> float:
    item = m.itemsize
    gemm, passes, masks = profile.gemm, profile.elementwise, profile.dropout
    rows, cols_in, cols_out = shape.rows, shape.in_cols, shape.out_cols
    multiplied = shape.inputs if shape.transform_first else rows  # rows of F transform-first, else of H
    needs_input = shape.layer > 0 or m.learnable_features or projected
    seconds = gemm.seconds(multiplied, cols_in, cols_out, item) + gemm.seconds(
        cols_in, multiplied, cols_out, item
    )
    if needs_input:
        seconds += gemm.seconds(multiplied, cols_out, cols_in, item)
    if shape.layer == 0 and m.dropout_rate > 0:
        input_elements = shape.inputs * cols_in
        seconds += masks.seconds(input_elements, 1) * (2 if m.learnable_features else 1)
    if not last:
        output_elements = rows * cols_out
        seconds += masks.seconds(output_elements, 1) + passes.seconds(output_elements * (2 * item + 1))
    return seconds


def _stack_dense(
    shapes: list[LayerShape], profile: DeviceProfile, m: ModelConfig, parts: StackParts
) -> np.ndarray:
    """Per layer, the dense seconds of the parts around the GCN layers: the input projection's X W and dW
    (and dX when the features are learned) in layer 0, the head's Y = X W, dX and dW in the last; per
    block, the RMSNorm's passes (row squares, the fused forward, two backward) and the residual's copies."""
    item, gemm, passes = m.itemsize, profile.gemm, profile.elementwise
    seconds = np.zeros(len(shapes))
    first, last = shapes[0], shapes[-1]
    if (p := parts.projection) is not None:
        rows, k, n = first.inputs, p.in_cols(parts.num_features).size, first.in_cols
        seconds[0] += gemm.seconds(rows, k, n, item) + gemm.seconds(k, rows, n, item)
        if m.learnable_features:
            seconds[0] += gemm.seconds(rows, n, k, item)
    if (h := parts.head) is not None:
        rows, k, n = last.rows, last.out_cols, h.out_cols(parts.num_classes).size
        seconds[-1] += gemm.seconds(rows, k, n, item) + gemm.seconds(rows, n, k, item)
        seconds[-1] += gemm.seconds(k, rows, n, item)
    for s in shapes:
        elements = s.rows * s.out_cols
        if parts.norm and s.layer in parts.blocks(len(shapes)):
            seconds[s.layer] += passes.seconds(4 * elements * item, 4)
        if parts.has_residual(s, len(shapes)):
            seconds[s.layer] += passes.seconds(2 * elements * item, 2)
    return seconds


def _allocation_seconds(
    allocated: list[Allocation], layers: int, profile: DeviceProfile
) -> tuple[np.ndarray, np.ndarray]:
    """Page-fault seconds per layer (those of layer -1 and beyond the last counted to the first and the
    last) of the epoch's fresh tensors: (SpMM outputs, the others)."""
    spmm, dense = np.zeros(layers), np.zeros(layers)
    for tensor in allocated:
        target = spmm if tensor.spmm else dense
        target[min(max(tensor.layer, 0), layers - 1)] += profile.allocation.seconds(tensor.nbytes)
    return spmm, dense


def collective_seconds(
    collectives: list[Collective],
    profile: DeviceProfile,
    itemsize: int,
    spanning: tuple[bool, ...],
    ranks_per_node: int,
) -> float:
    """Seconds of `collectives` as the profile prices them, a collective across nodes when the groups
    along its axis span nodes (`spanning`, per axis), with `ranks_per_node` ranks moving bytes at once."""
    return float(
        sum(
            profile.collective_seconds(
                c.wire_bytes(itemsize),
                c.group_size,
                spanning[c.axis] if c.axis < len(spanning) else any(spanning[:3]),
                ranks_per_node,
            )
            for c in collectives
        )
    )


def epoch_time(
    shapes: list[LayerShape],
    nnz: np.ndarray,
    collectives: list[Collective],
    profile: DeviceProfile,
    m: ModelConfig,
    parameters: int,
    ranks_per_node: int,
    allocated: list[Allocation],
    spanning: tuple[bool, ...] = (False, False, False),
    parts: StackParts = GCN_PARTS,
) -> EpochTime:
    """Seconds of one epoch on every rank of a grid whose shard nonzeros are nnz[rank, layer], with
    `ranks_per_node` ranks computing side by side on each machine (the profile's factors for that);
    `allocated` the tensors one epoch creates, as gtool.plan.costmodel.memory replays them; `spanning` which
    axes' groups span nodes (a whole grid's group, a residual's, spans them when any does); `parts` what
    the model has around its GCN layers."""
    item = m.itemsize
    spmm = np.zeros(nnz.shape)
    dense = np.zeros(nnz.shape)
    for shape in shapes:
        layer = shape.layer
        width = shape.out_cols if shape.transform_first else shape.in_cols
        forward = profile.spmm.seconds(nnz[:, layer], shape.rows, shape.inputs, width, item)
        spmm[:, layer] = forward
        if shape.transform_first or layer > 0 or m.learnable_features or parts.projection is not None:
            spmm[:, layer] += profile.spmm.seconds(nnz[:, layer], shape.inputs, shape.rows, width, item)
        ends = shape is shapes[-1] and parts.head is None  # the logits: no ReLU and dropout after it
        dense[:, layer] = _layer_dense(shape, profile, m, ends, parts.projection is not None)
    dense += _stack_dense(shapes, profile, m, parts)[None, :]
    last = shapes[-1]
    classes = last.out_cols if parts.head is None else parts.head.out_cols(parts.num_classes).size
    dense[:, -1] += profile.elementwise.seconds(LOSS_PASSES * last.rows * classes * item, LOSS_PASSES)
    dense[:, -1] += profile.elementwise.seconds(ADAM_PASSES * parameters * item, ADAM_PASSES * len(shapes))
    f = profile.epoch_factors(ranks_per_node)
    spmm_alloc, dense_alloc = _allocation_seconds(allocated, len(shapes), profile)
    spmm = spmm * f.spmm + spmm_alloc * f.allocation
    dense = dense * f.dense + dense_alloc * f.allocation
    comm = collective_seconds(collectives, profile, item, spanning, ranks_per_node)
    comm += f.collective_latency * len(collectives)
    return EpochTime(spmm, dense, comm, f.overhead_per_layer * len(shapes))
