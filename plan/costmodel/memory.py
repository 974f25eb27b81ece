"""Peak memory of one rank in a training epoch: what it holds throughout, plus the epoch's high-water mark.

Resident throughout (`static`): every distinct adjacency shard as CSR with its CSR transpose (int64
row pointers and column indices, stored values), the input-feature block, labels and split codes with
the loss's masks, and the parameter parts with their Adam state (two tensors per parameter) and
gradients. The epoch's tensors are replayed in the order gtool.trainer creates and frees them
(`epoch_timeline`), and the peak is the largest running total; the block sizes are the padded shapes of
gtool.geometry.shapes, so the figure is exact up to allocator rounding and small temporaries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from gtool.architecture import ModelConfig
from gtool.geometry.bandnnz import GridShards
from gtool.geometry.shapes import LayerShape

INDEX_BYTES = 8
"""int64 CSR row pointers and column indices."""
STORED_VALUE_BYTES = 4
"""float32 adjacency values and features, as the store keeps them."""
ADAM_STATES = 2


class Allocation(NamedTuple):
    """One tensor an epoch creates: its bytes, the layer whose time its page faults count to (the loss's
    tensors: the last layer's; layer 0's input gradient: -1), and whether an SpMM writes it."""

    nbytes: int
    layer: int
    spmm: bool


class Timeline:
    """Tensors allocated and freed in order, by name; `peak` is the largest total reached, `allocated`
    every allocation in order."""

    def __init__(self) -> None:
        self.live: dict[str, int] = {}
        self.total = 0
        self.peak = 0
        self.allocated: list[Allocation] = []

    def alloc(self, name: str, nbytes: int, layer: int, spmm: bool = False) -> None:
        self.live[name] = nbytes
        self.total += nbytes
        self.peak = max(self.peak, self.total)
        self.allocated.append(Allocation(nbytes, layer, spmm))

    def free(self, *names: str) -> None:
        for name in names:
            self.total -= self.live.pop(name, 0)


def _forward_layer(t: Timeline, s: LayerShape, m: ModelConfig, last: bool) -> None:
    """Layer `layer` forward. Aggregate-first: its input (already there) is aggregated and released, H
    stays for dW. Transform-first: its input stays for dW, Z = F W is released once aggregated. The ReLU
    fused with the next layer's dropout keeps a one-byte flag per element of its output."""
    item, layer = m.itemsize, s.layer
    ga, gw = s.sizes[0], s.geometry.size(s.geometry.weight_axis)
    if layer == 0:
        input_block = s.inputs * s.in_cols * item
        if m.learnable_features and ga > 1:
            t.alloc("input 0", ga * -(-s.inputs * s.in_cols // ga) * item, 0)
        if m.dropout_rate > 0:
            t.alloc("dropped input 0", input_block, 0)
            t.free("input 0")
            t.live["input 0"] = t.live.pop("dropped input 0")
    if s.transform_first:
        if gw > 1:
            t.alloc(f"gathered weight {layer}", gw * s.weight_part * item, layer)
        t.alloc(f"Z {layer}", s.inputs * s.out_cols * item, layer)
        t.alloc(f"Q {layer}", s.rows * s.out_cols * item, layer, spmm=True)
        t.free(f"Z {layer}")
    else:
        t.alloc(f"H {layer}", s.rows * s.in_cols * item, layer, spmm=True)
        t.free(f"input {layer}")
        if gw > 1:
            t.alloc(f"gathered weight {layer}", gw * s.weight_part * item, layer)
        t.alloc(f"Q {layer}", s.rows * s.out_cols * item, layer)
    if last:
        return
    t.alloc(f"input {layer + 1}", s.rows * s.out_cols * item, layer + 1)
    t.alloc(f"flag {layer}", s.rows * s.out_cols, layer)
    t.free(f"Q {layer}")


def _loss(t: Timeline, last: LayerShape, m: ModelConfig, classes: int) -> None:
    """Softmax cross-entropy: the softmax is kept for backward, the logits released once it is made."""
    block = last.rows * last.out_cols * m.itemsize
    if last.out_cols * last.geometry.size(last.geometry.out_col_axis) > classes:
        t.alloc("masked logits", block, last.layer)
    t.alloc("exp", block, last.layer)
    t.alloc("softmax", block, last.layer)
    t.free("exp", "masked logits", f"Q {last.layer}")
    t.alloc("grad logits", block, last.layer)
    t.free("softmax")
    t.live[f"grad Q {last.layer}"] = t.live.pop("grad logits")


def _weight_gradient(t: Timeline, s: LayerShape, m: ModelConfig, released: tuple[str, ...]) -> None:
    """dW, then `released` and the gathered weight freed, and dW reduce-scattered onto its part."""
    item, layer = m.itemsize, s.layer
    t.alloc(f"dW {layer}", s.in_cols * s.out_cols * item, layer)
    t.free(*released, f"gathered weight {layer}")
    if s.geometry.size(s.geometry.weight_axis) > 1:
        t.alloc(f"padded dW {layer}", s.geometry.size(s.geometry.weight_axis) * s.weight_part * item, layer)
        t.alloc(f"dW part {layer}", s.weight_part * item, layer)
        t.free(f"padded dW {layer}", f"dW {layer}")


def _backward_layer(t: Timeline, s: LayerShape, m: ModelConfig) -> None:
    """Layer `layer` backward from the gradient of its output. Aggregate-first: dH and dW, H and the
    gathered weight released, then dF = A^T dH. Transform-first: dZ = A^T dY, then dF = dZ W^T and dW,
    the input, the gathered weight and dZ released. Then the gradient through the previous layer's ReLU
    and dropout (from its flag)."""
    item, layer = m.itemsize, s.layer
    ga = s.sizes[0]
    needs_input = layer > 0 or m.learnable_features
    input_block = s.inputs * s.in_cols * item
    if s.transform_first:
        t.alloc(f"dZ {layer}", s.inputs * s.out_cols * item, layer, spmm=True)
        t.free(f"grad Q {layer}")
        if needs_input:
            t.alloc(f"dF {layer}", input_block, layer)
        _weight_gradient(t, s, m, (f"input {layer}", f"dZ {layer}"))
    else:
        if needs_input:
            t.alloc(f"dH {layer}", s.rows * s.in_cols * item, layer)
        _weight_gradient(t, s, m, (f"H {layer}", f"grad Q {layer}"))
        if needs_input:
            t.alloc(f"dF {layer}", input_block, layer, spmm=True)
            t.free(f"dH {layer}")
    if not needs_input:
        return
    if layer > 0 or m.dropout_rate > 0:
        t.alloc(f"grad Q {layer - 1}", input_block, layer - 1)
        t.free(f"dF {layer}", f"flag {layer - 1}")
    if layer == 0 and ga > 1:
        t.alloc("padded dF 0", ga * -(-s.inputs * s.in_cols // ga) * item, 0)
        t.free("padded dF 0", "grad Q -1", "dF 0")


def epoch_timeline(shapes: list[LayerShape], m: ModelConfig, classes: int) -> Timeline:
    """The tensors an epoch creates beyond the static ones, replayed in the trainer's order."""
    t = Timeline()
    for s in shapes:
        _forward_layer(t, s, m, s is shapes[-1])
    _loss(t, shapes[-1], m, classes)
    for s in reversed(shapes):
        _backward_layer(t, s, m)
    return t


def epoch_peak(shapes: list[LayerShape], m: ModelConfig, classes: int) -> int:
    """The largest total of the tensors an epoch creates beyond the static ones (bytes)."""
    return epoch_timeline(shapes, m, classes).peak


def parameter_elements(shapes: list[LayerShape], m: ModelConfig) -> int:
    """Elements of this rank's parameter parts: weight parts and, when learned, its feature part."""
    weights = sum(s.weight_part for s in shapes)
    first = shapes[0]
    features = -(-first.inputs * first.in_cols // first.sizes[0]) if m.learnable_features else 0
    return weights + features


def adjacency_bytes(shards: GridShards, m: ModelConfig) -> np.ndarray:
    """Bytes of each rank's distinct CSR shards and their transposes, as the trainer holds them (a second
    copy of the values when the training dtype is not the stored float32; row-block pointers with
    --agg-blocks)."""
    pointers = shards.rows + shards.cols + 2
    if m.agg_blocks > 1:
        pointers = pointers + shards.rows + shards.cols + 2 * m.agg_blocks
    values = STORED_VALUE_BYTES + (m.itemsize if m.itemsize != STORED_VALUE_BYTES else 0)
    per_shard = pointers * INDEX_BYTES + 2 * shards.nnz * (INDEX_BYTES + values)
    return (per_shard * shards.first).sum(axis=1, dtype=np.int64)


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per rank (arrays over ranks where they differ)."""

    adjacency: np.ndarray
    features: int
    labels: int
    parameters: int
    optimizer: int
    gradients: int
    activations: int

    @property
    def static(self) -> np.ndarray:
        return self.adjacency + self.features + self.labels + self.parameters + self.optimizer

    @property
    def peak(self) -> np.ndarray:
        """Peak bytes of each rank: static plus gradients plus the epoch's high-water mark."""
        return self.static + self.gradients + self.activations

    def parts(self, rank: int) -> dict[str, int]:
        return {
            "adjacency": int(self.adjacency[rank]),
            "features": self.features,
            "labels": self.labels,
            "parameters": self.parameters,
            "optimizer": self.optimizer,
            "gradients": self.gradients,
            "activations": self.activations,
            "peak": int(self.peak[rank]),
        }


def estimate_memory(
    shapes: list[LayerShape], shards: GridShards, m: ModelConfig, classes: int
) -> MemoryEstimate:
    """Per-rank memory of a grid whose ranks hold `shards`."""
    adjacency = adjacency_bytes(shards, m)
    first, last = shapes[0], shapes[-1]
    features = first.inputs * first.in_cols * STORED_VALUE_BYTES
    if m.itemsize != STORED_VALUE_BYTES:
        features += first.inputs * first.in_cols * m.itemsize
    labels = last.rows * (8 + 1 + 3 + 8)
    params = parameter_elements(shapes, m) * m.itemsize
    return MemoryEstimate(
        adjacency=adjacency,
        features=features,
        labels=labels,
        parameters=params,
        optimizer=ADAM_STATES * params,
        gradients=params,
        activations=epoch_peak(shapes, m, classes),
    )
