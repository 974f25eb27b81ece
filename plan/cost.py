"""Predicted seconds of one training epoch on every rank of a grid, from shapes, nonzeros and a profile.

Per layer l (shapes of gtool.plan.shapes, nnz[r, l] the rank's shard nonzeros):

    SpMM    forward  A[B_a x B_b] @ F[B_b x C_in];  backward A^T @ dH (when l > 0 or features are learned)
    dense   forward  H @ W (B_a x C_in x C_out), dropout mask of the B_b x D_l input block and its product,
                     ReLU; backward dH = dQ W^T (when the input is differentiated), dW = H^T dQ, the ReLU
                     and dropout gradients; the loss (about 12 passes over the logits block) and Adam
                     (about 12 passes over the parameter parts)
    comm    every collective of gtool.plan.collectives: latency + ring wire bytes * per-byte cost

Ranks wait for each other at every layer's collectives, so the epoch takes, per layer, the slowest rank's
computation, plus the communication: epoch = sum over layers of max over ranks (SpMM + dense) + comm.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gtool.plan.collectives import Collective
from gtool.plan.memory import ModelSettings
from gtool.plan.profile import DeviceProfile
from gtool.plan.shapes import LayerShape
from gtool.trainer.randomness import MASK_CHUNK_ROWS

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
    gemm, passes = profile.gemm, profile.elementwise
    rows, cols_in, cols_out = shape.rows, shape.in_cols, shape.out_cols
    input_block = shape.inputs * cols_in * item
    output_block = rows * cols_out * item
    needs_input = shape.layer > 0 or m.learnable_features
    seconds = gemm.seconds(rows, cols_in, cols_out, item) + gemm.seconds(cols_in, rows, cols_out, item)
    if needs_input:
        seconds += gemm.seconds(rows, cols_out, cols_in, item)
    if m.dropout > 0:
        chunks = -(-shape.inputs // MASK_CHUNK_ROWS) + 1
        seconds += profile.dropout.seconds(shape.inputs * shape.in_dim, chunks)
        seconds += passes.seconds(3 * input_block, 3) + (passes.seconds(input_block) if needs_input else 0.0)
    if not last:
        seconds += passes.seconds(3 * output_block, 2)
    return seconds


def epoch_time(
    shapes: list[LayerShape],
    nnz: np.ndarray,
    collectives: list[Collective],
    profile: DeviceProfile,
    m: ModelSettings,
    parameters: int,
) -> EpochTime:
    """Seconds of one epoch on every rank of a grid whose shard nonzeros are nnz[rank, layer]."""
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
    return EpochTime(spmm, dense, float(comm))
