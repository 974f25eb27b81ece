"""Predicted seconds of one training epoch on every rank of a grid, from shapes, nonzeros and a profile.

Per layer l (shapes of gtool.plan.shapes, nnz[r, l] the rank's shard nonzeros):

    SpMM    forward  A[B_a x B_b] @ F[B_b x C_in];  backward A^T @ dH (when l > 0 or features are learned)
    dense   forward  H @ W (B_a x C_in x C_out), the ReLU fused with the next layer's dropout (one
                     mask pass over B_a x C_out; layer 0's dropout one over B_b x C_in); backward
                     dH = dQ W^T (when the input is differentiated), dW = H^T dQ, the ReLU/dropout
                     gradient (an element-wise pass); the loss (about 12 passes over the logits block)
                     and Adam (about 12 passes over the parameter parts)
    comm    every collective of gtool.plan.collectives: latency + ring wire bytes * per-byte cost

Ranks wait for each other at every layer's collectives, so the epoch takes, per layer, the slowest rank's
computation, plus the communication: epoch = sum over layers of max over ranks (SpMM + dense) + comm.
On the CPU, ranks that share a machine share its cores, caches and memory bandwidth, and the collectives'
copies and sums run on the same cores: every term is multiplied by the profile's measured slowdown for
that many ranks side by side (1 on GPUs, where each rank has its own device).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gtool.plan.collectives import Collective
from gtool.plan.memory import ModelSettings
from gtool.plan.profile import DeviceProfile
from gtool.plan.shapes import LayerShape

LOSS_PASSES = 12
ADAM_PASSES = 12


@dataclass(frozen=True)
class EpochTime:
    """Seconds per rank and layer ([rank, layer] arrays) and of the collectives."""

    spmm: np.ndarray
    dense: np.ndarray
    comm: float

    @property
    def compute(self) -> np.ndarray:
        return self.spmm + self.dense

    @property
    def total(self) -> float:
        """The epoch: per layer the slowest rank's computation, plus all communication."""
        return float(self.compute.max(axis=0).sum()) + self.comm

    @property
    def slowest_rank(self) -> int:
        return int(self.compute.sum(axis=1).argmax())


def _layer_dense(shape: LayerShape, profile: DeviceProfile, m: ModelSettings, last: bool) -> float:
    item = m.itemsize
    gemm, passes, masks = profile.gemm, profile.elementwise, profile.dropout
    rows, cols_in, cols_out = shape.rows, shape.in_cols, shape.out_cols
    needs_input = shape.layer > 0 or m.learnable_features
    seconds = gemm.seconds(rows, cols_in, cols_out, item) + gemm.seconds(cols_in, rows, cols_out, item)
    if needs_input:
        seconds += gemm.seconds(rows, cols_out, cols_in, item)
    if shape.layer == 0 and m.dropout > 0:
        input_elements = shape.inputs * cols_in
        seconds += masks.seconds(input_elements, 1) * (2 if m.learnable_features else 1)
    if not last:
        output_elements = rows * cols_out
        seconds += masks.seconds(output_elements, 1) + passes.seconds(output_elements * (2 * item + 1))
    return seconds


def epoch_time(
    shapes: list[LayerShape],
    nnz: np.ndarray,
    collectives: list[Collective],
    profile: DeviceProfile,
    m: ModelSettings,
    parameters: int,
    ranks_per_node: int,
) -> EpochTime:
    """Seconds of one epoch on every rank of a grid whose shard nonzeros are nnz[rank, layer], with
    `ranks_per_node` ranks computing side by side on each machine (the profile's slowdown for that)."""
    item = m.itemsize
    spmm = np.zeros(nnz.shape)
    dense = np.zeros(nnz.shape)
    for shape in shapes:
        layer = shape.layer
        forward = profile.spmm.seconds(nnz[:, layer], shape.rows, shape.inputs, shape.in_cols, item)
        spmm[:, layer] = forward
        if layer > 0 or m.learnable_features:
            spmm[:, layer] += profile.spmm.seconds(
                nnz[:, layer], shape.inputs, shape.rows, shape.in_cols, item
            )
        dense[:, layer] = _layer_dense(shape, profile, m, shape is shapes[-1])
    last = shapes[-1]
    dense[:, -1] += profile.elementwise.seconds(LOSS_PASSES * last.rows * last.out_cols * item, LOSS_PASSES)
    dense[:, -1] += profile.elementwise.seconds(ADAM_PASSES * parameters * item, ADAM_PASSES * len(shapes))
    comm = sum(profile.collective_seconds(c.wire_bytes(item), c.group_size) for c in collectives)
    slowdown = profile.slowdown(ranks_per_node)
    return EpochTime(spmm * slowdown, dense * slowdown, float(comm) * slowdown)
