"""Peak memory of one rank in a training epoch: what it holds throughout, plus the epoch's high-water mark.

Resident throughout (`static`): every distinct adjacency shard as CSR with its CSR transpose (int64
row pointers and column indices, stored values), the input-feature block, labels and split codes with
the loss's masks, and the parameter parts with their Adam state (two tensors per parameter) and
gradients. The epoch's tensors are replayed in the order gtool.trainer creates and frees them
(`epoch_timeline`), and the peak is the largest running total; the block sizes are the padded shapes of
gtool.geometry.shapes, so the figure is exact up to allocator rounding and small temporaries.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from gtool.architecture import ModelConfig
from gtool.geometry.bandnnz import GridShards
from gtool.geometry.bands import ceil_div
from gtool.geometry.shapes import GCN_PARTS, LayerShape, StackParts

INDEX_BYTES = 8
"""int64 CSR row pointers and column indices."""
STORED_VALUE_BYTES = 4
"""float32 adjacency values and features, as the store keeps them."""
ADAM_STATES = 2
LABEL_BYTES = 8 + 1 + 3 + 8
"""Per row of the output block: its label, split code and the loss's masks, as the trainer keeps them."""


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


def _input_features(t: Timeline, rows: int, cols: int, ga: int, m: ModelConfig, name: str) -> None:
    """The feature block as the first operation takes it: gathered when learned, dropped out (a copy)."""
    if m.learnable_features and ga > 1:
        t.alloc(name, ga * ceil_div(rows * cols, ga) * m.itemsize, 0)
    if m.dropout_rate > 0:
        t.alloc(f"dropped {name}", rows * cols * m.itemsize, 0)
        t.free(name)
        t.live[name] = t.live.pop(f"dropped {name}")


def _biased(t: Timeline, name: str, nbytes: int, layer: int, parts: StackParts) -> None:
    """`name` replaced by its sum with a bias (a new block; the old one is not kept for backward)."""
    if parts.bias:
        t.alloc(f"biased {name}", nbytes, layer)
        t.free(name)
        t.live[name] = t.live.pop(f"biased {name}")


def _forward_layer(
    t: Timeline, s: LayerShape, m: ModelConfig, last: bool, parts: StackParts, layers: int
) -> None:
    """Layer `layer` forward. Aggregate-first: its input (already there) is aggregated and released, H
    stays for dW. Transform-first: its input stays for dW, Z = F W is released once aggregated. The ReLU
    fused with the next layer's dropout keeps a one-byte flag per element of its output; with RMSNorm the
    fused pass keeps z and one inverse RMS per row instead. A residual's resharded input block lives
    from the layer's start to the add."""
    item, layer = m.itemsize, s.layer
    gw = s.geometry.size(s.geometry.weight_axis)
    output = s.rows * s.out_cols * item
    if layer == 0 and parts.projection is None:
        _input_features(t, s.inputs, s.in_cols, s.sizes[0], m, "input 0")
    residual = parts.has_residual(s, layers)
    if residual:
        t.alloc(f"residual {layer}", output, layer)
    if s.transform_first:
        if gw > 1:
            t.alloc(f"gathered weight {layer}", gw * s.weight_part * item, layer)
        t.alloc(f"Z {layer}", s.inputs * s.out_cols * item, layer)
        t.alloc(f"Q {layer}", output, layer, spmm=True)
        t.free(f"Z {layer}")
    else:
        t.alloc(f"H {layer}", s.rows * s.in_cols * item, layer, spmm=True)
        t.free(f"input {layer}")
        if gw > 1:
            t.alloc(f"gathered weight {layer}", gw * s.weight_part * item, layer)
        t.alloc(f"Q {layer}", output, layer)
    _biased(t, f"Q {layer}", output, layer, parts)
    if last:
        return
    t.alloc(f"input {layer + 1}", output, layer + 1)
    if parts.norm:
        t.alloc(f"inverse rms {layer}", s.rows * item, layer)
    else:
        t.alloc(f"flag {layer}", s.rows * s.out_cols, layer)
        t.free(f"Q {layer}")
        if residual:  # y + residual: a new block
            t.alloc(f"sum {layer}", output, layer + 1)
            t.free(f"input {layer + 1}")
            t.live[f"input {layer + 1}"] = t.live.pop(f"sum {layer}")
    t.free(f"residual {layer}")


def _projection_forward(t: Timeline, first: LayerShape, m: ModelConfig, parts: StackParts) -> None:
    """The input projection: the (dropped) features and the gathered weight stay for dW; its output,
    biased, is layer 0's input."""
    p = parts.projection
    assert p is not None
    item, gb = m.itemsize, p.sizes[1]
    _input_features(t, first.inputs, p.in_cols(parts.num_features).size, p.sizes[0], m, "features")
    if gb > 1:
        t.alloc("gathered projection weight", gb * p.weight_part(parts.num_features, parts.hidden) * item, 0)
    output = first.inputs * first.in_cols * item
    t.alloc("input 0", output, 0)
    _biased(t, "input 0", output, 0, parts)


def _linear_weight_gradient(
    t: Timeline, name: str, in_cols: int, out_cols: int, part: int, size: int, item: int, layer: int
) -> None:
    """A dense layer's dW, reduce-scattered onto its part over the `size` ranks that split it."""
    t.alloc(f"{name} dW", in_cols * out_cols * item, layer)
    t.free(f"gathered {name} weight")
    if size > 1:
        t.alloc(f"{name} padded dW", size * part * item, layer)
        t.alloc(f"{name} dW part", part * item, layer)
        t.free(f"{name} padded dW", f"{name} dW")


def _projection_backward(t: Timeline, first: LayerShape, m: ModelConfig, parts: StackParts) -> None:
    p = parts.projection
    assert p is not None
    dims = (parts.num_features, parts.hidden)
    cols = p.in_cols(parts.num_features).size
    part = p.weight_part(*dims)
    _linear_weight_gradient(
        t, "projection", cols, p.out_cols(parts.hidden).size, part, p.sizes[1], m.itemsize, 0
    )
    t.free("features", "grad Q -1")


def _head_forward(t: Timeline, last: LayerShape, m: ModelConfig, parts: StackParts) -> None:
    """The output head: its input (the last block's output) and the gathered weight stay for dW."""
    h = parts.head
    assert h is not None
    item, layers = m.itemsize, last.layer + 1
    gb = h.sizes[1]
    if gb > 1:
        t.alloc("gathered head weight", gb * h.weight_part(parts.hidden, parts.num_classes) * item, layers)
    logits = last.rows * h.out_cols(parts.num_classes).size * item
    t.alloc(f"Q {layers}", logits, layers)
    _biased(t, f"Q {layers}", logits, layers, parts)


def _head_backward(t: Timeline, last: LayerShape, m: ModelConfig, parts: StackParts) -> None:
    """dX of the head, then its dW; then the gradient through the last block (its z and flag freed)."""
    h = parts.head
    assert h is not None
    item, layers = m.itemsize, last.layer + 1
    block = last.rows * last.out_cols * item
    t.alloc("head dX", block, layers)
    cols = h.out_cols(parts.num_classes).size
    part = h.weight_part(parts.hidden, parts.num_classes)
    _linear_weight_gradient(t, "head", last.out_cols, cols, part, h.sizes[1], item, layers)
    t.free(f"input {layers}", f"grad Q {layers}")
    t.alloc(f"grad Q {last.layer}", block, last.layer)
    t.free("head dX", f"flag {last.layer}", f"Q {last.layer}", f"inverse rms {last.layer}")


def _loss(t: Timeline, rows: int, cols: int, padded: bool, layer: int, m: ModelConfig) -> None:
    """Softmax cross-entropy: the softmax is kept for backward, the logits released once it is made."""
    block = rows * cols * m.itemsize
    if padded:
        t.alloc("masked logits", block, layer)
    t.alloc("exp", block, layer)
    t.alloc("softmax", block, layer)
    t.free("exp", "masked logits", f"Q {layer}")
    t.alloc("grad logits", block, layer)
    t.free("softmax")
    t.live[f"grad Q {layer}"] = t.live.pop("grad logits")


def _weight_gradient(t: Timeline, s: LayerShape, m: ModelConfig, released: tuple[str, ...]) -> None:
    """dW, then `released` and the gathered weight freed, and dW reduce-scattered onto its part."""
    item, layer = m.itemsize, s.layer
    t.alloc(f"dW {layer}", s.in_cols * s.out_cols * item, layer)
    t.free(*released, f"gathered weight {layer}")
    if s.geometry.size(s.geometry.weight_axis) > 1:
        t.alloc(f"padded dW {layer}", s.geometry.size(s.geometry.weight_axis) * s.weight_part * item, layer)
        t.alloc(f"dW part {layer}", s.weight_part * item, layer)
        t.free(f"padded dW {layer}", f"dW {layer}")


def _backward_layer(t: Timeline, s: LayerShape, m: ModelConfig, parts: StackParts, layers: int) -> None:
    """Layer `layer` backward from the gradient of its output. Aggregate-first: dH and dW, H and the
    gathered weight released, then dF = A^T dH. Transform-first: dZ = A^T dY, then dF = dZ W^T and dW,
    the input, the gathered weight and dZ released. A residual adds its reshard's gradient (a block of
    the input's shape). Then the gradient through the previous layer's ReLU and dropout (from its flag;
    or its norm, freeing z and the inverse RMS)."""
    item, layer = m.itemsize, s.layer
    ga = s.sizes[0]
    projected = parts.projection is not None
    needs_input = layer > 0 or m.learnable_features or projected
    input_block = s.inputs * s.in_cols * item
    if parts.has_residual(s, layers):
        t.alloc(f"d residual {layer}", input_block, layer)
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
    if layer > 0 or m.dropout_rate > 0 or projected:
        t.alloc(f"grad Q {layer - 1}", input_block, layer - 1)
        t.free(f"dF {layer}", f"flag {layer - 1}", f"Q {layer - 1}", f"inverse rms {layer - 1}")
    t.free(f"d residual {layer}")
    if layer == 0 and ga > 1 and not projected:
        t.alloc("padded dF 0", ga * -(-s.inputs * s.in_cols // ga) * item, 0)
        t.free("padded dF 0", "grad Q -1", "dF 0")


def _forward(t: Timeline, shapes: list[LayerShape], m: ModelConfig, parts: StackParts) -> None:
    """The forward pass up to the logits."""
    layers, first, last = len(shapes), shapes[0], shapes[-1]
    if parts.projection is not None:
        _projection_forward(t, first, m, parts)
    for s in shapes:
        _forward_layer(t, s, m, s is last and parts.head is None, parts, layers)
    if parts.head is not None:
        _head_forward(t, last, m, parts)


def epoch_timeline(
    shapes: list[LayerShape], m: ModelConfig, classes: int, parts: StackParts = GCN_PARTS
) -> Timeline:
    """The tensors an epoch creates beyond the static ones, replayed in the trainer's order."""
    t = Timeline()
    layers, first, last = len(shapes), shapes[0], shapes[-1]
    _forward(t, shapes, m, parts)
    if parts.head is not None:
        cols, size = parts.head.out_cols(classes).size, parts.head.sizes[0]
        _loss(t, last.rows, cols, cols * size > classes, layers, m)
        _head_backward(t, last, m, parts)
    else:
        size = last.geometry.size(last.geometry.out_col_axis)
        _loss(t, last.rows, last.out_cols, last.out_cols * size > classes, last.layer, m)
    for s in reversed(shapes):
        _backward_layer(t, s, m, parts, layers)
    if parts.projection is not None:
        _projection_backward(t, first, m, parts)
    return t


def evaluation_peak(shapes: list[LayerShape], m: ModelConfig, parts: StackParts = GCN_PARTS) -> int:
    """An evaluation's high-water mark: every tensor its forward (no dropout) creates, none freed before
    the scores (measured on an 8M-node store, 2 layers: 4.0 GiB over the run's static memory, against
    4.05 GiB summed here and 2.1 GiB replayed with the training forward's frees)."""
    t = Timeline()
    _forward(t, shapes, replace(m, dropout=0.0), parts)
    return sum(a.nbytes for a in t.allocated)


def epoch_peak(shapes: list[LayerShape], m: ModelConfig, classes: int, parts: StackParts = GCN_PARTS) -> int:
    """The largest total of the tensors an epoch creates beyond the static ones (bytes)."""
    return epoch_timeline(shapes, m, classes, parts).peak


def parameter_parts(shapes: list[LayerShape], parts: StackParts = GCN_PARTS) -> list[int]:
    """Elements of each parameter part a rank owns: the GCN layers' weight parts, the projection's and
    head's, and the parts of the biases and norm scales (split over their row axis)."""
    owned = [s.weight_part for s in shapes]
    p, h = parts.projection, parts.head
    if p is not None:
        owned.append(p.weight_part(parts.num_features, parts.hidden))
        if parts.bias:
            owned.append(ceil_div(p.out_cols(parts.hidden).size, p.sizes[1]))
    if h is not None:
        owned.append(h.weight_part(parts.hidden, parts.num_classes))
        if parts.bias:
            owned.append(ceil_div(h.out_cols(parts.num_classes).size, h.sizes[1]))
    for s in shapes:
        vectors = int(parts.bias) + int(parts.norm and s.layer in parts.blocks(len(shapes)))
        owned += [ceil_div(s.out_cols, s.geometry.size(s.geometry.row_axis))] * vectors
    return owned


def parameter_elements(shapes: list[LayerShape], m: ModelConfig, parts: StackParts = GCN_PARTS) -> int:
    """Elements of this rank's parameter parts: weight and vector parts (`parameter_parts`) and, when
    learned, its feature part."""
    first = shapes[0]
    cols = first.in_cols if parts.projection is None else parts.projection.in_cols(parts.num_features).size
    ga = first.sizes[0] if parts.projection is None else parts.projection.sizes[0]
    features = ceil_div(first.inputs * cols, ga) if m.learnable_features else 0
    return sum(parameter_parts(shapes, parts)) + features


def reshard_index_bytes(shapes: list[LayerShape], parts: StackParts) -> int:
    """Bytes of the residuals' reshard plans the trainer keeps from the first epoch on (trainer.nn.reshard
    Moves): per residual, the int64 local row indices of the pieces it sends (its input block's real rows,
    once per peer column band they reach) and fills (its output block's real rows, once per source column
    band); backward reuses them."""
    total = 0
    for s in shapes:
        if not parts.has_residual(s, len(shapes)):
            continue
        g = s.geometry
        source_bands = max(1, ceil_div(g.size(g.roles[2]), g.size(g.out_col_axis)))
        target_bands = max(1, ceil_div(g.size(g.out_col_axis), g.size(g.roles[2])))
        total += (s.real_rows * source_bands + g.inputs.real * target_bands) * INDEX_BYTES
    return total


def adjacency_bytes(shards: GridShards, m: ModelConfig, transposes: bool = True) -> np.ndarray:
    """Bytes of each rank's distinct CSR shards and (with `transposes`) their transposes, as the trainer
    holds them (a second copy of the values when the training dtype is not the stored float32; row-block
    pointers with --agg-blocks)."""
    copies = 2 if transposes else 1
    pointers = shards.rows + 1 + (shards.cols + 1 if transposes else 0)
    if m.agg_blocks > 1:
        pointers = (
            pointers + (shards.rows + shards.cols if transposes else shards.rows) + copies * m.agg_blocks
        )
    values = STORED_VALUE_BYTES + (m.itemsize if m.itemsize != STORED_VALUE_BYTES else 0)
    per_shard = pointers * INDEX_BYTES + copies * shards.nnz * (INDEX_BYTES + values)
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
    reshard_indices: int = 0
    sampling: int = 0
    """Mini-batch runs: the epoch's node order, the bands' sorted node ids, the steps' cut blocks."""

    @property
    def static(self) -> np.ndarray:
        return (
            self.adjacency
            + self.features
            + self.labels
            + self.parameters
            + self.optimizer
            + self.reshard_indices
            + self.sampling
        )

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
            "reshard_indices": self.reshard_indices,
            "sampling": self.sampling,
            "peak": int(self.peak[rank]),
        }


def feature_columns(shapes: list[LayerShape], parts: StackParts) -> int:
    """Columns of the rank's input feature block (the projection's input columns when there is one)."""
    return (
        shapes[0].in_cols if parts.projection is None else parts.projection.in_cols(parts.num_features).size
    )


def feature_bytes(rows: int, cols: int, m: ModelConfig) -> int:
    """Bytes of `rows` x `cols` features as the trainer holds them: stored float32, and a copy in the
    training dtype when it differs."""
    return rows * cols * (STORED_VALUE_BYTES + (m.itemsize if m.itemsize != STORED_VALUE_BYTES else 0))


def estimate_memory(
    shapes: list[LayerShape], shards: GridShards, m: ModelConfig, classes: int, parts: StackParts = GCN_PARTS
) -> MemoryEstimate:
    """Per-rank memory of a grid whose ranks hold `shards`, of a model with `parts` around its layers."""
    adjacency = adjacency_bytes(shards, m)
    first, last = shapes[0], shapes[-1]
    features = feature_bytes(first.inputs, feature_columns(shapes, parts), m)
    labels = last.rows * LABEL_BYTES
    params = parameter_elements(shapes, m, parts) * m.itemsize
    return MemoryEstimate(
        adjacency=adjacency,
        features=features,
        labels=labels,
        parameters=params,
        optimizer=ADAM_STATES * params,
        gradients=params,
        activations=epoch_peak(shapes, m, classes, parts),
        reshard_indices=reshard_index_bytes(shapes, parts),
    )
