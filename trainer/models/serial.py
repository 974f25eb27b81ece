"""A plain single-process GCN on the whole graph with torch.sparse: the reference for tests and benchmarks.

It shares with the parallel trainer only what defines the model (initial weights, dropout masks, drawn
here by the plain-torch specification `keep_mask`) and uses torch.optim, so it checks the trainer's own
Adam, dropout kernels and parallel machinery. With `torch_dropout` it draws its masks with F.dropout
instead, as a plain PyTorch GCN does (the benchmarks' reference).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from gtool.loader import RankData, csr_tensor
from gtool.store.layout import SPLIT_CODES
from gtool.trainer.config import TrainConfig
from gtool.trainer.models.places import initial_parameters, is_vector
from gtool.trainer.nn.dropout import MaskSpec, keep_mask
from gtool.trainer.nn.fused.reference import NORM_EPS


class _SparseMatmul(torch.autograd.Function):
    """A @ X with a precomputed A^T for the backward pass."""

    @staticmethod
    def forward(ctx, dense, matrix, transpose):
        ctx.transpose = transpose
        return matrix @ dense

    @staticmethod
    def backward(ctx, grad):
        return ctx.transpose @ grad, None, None


def torch_csr(matrix: sp.spmatrix, dtype: torch.dtype) -> torch.Tensor:
    """A scipy sparse matrix as a torch sparse CSR tensor."""
    csr = sp.csr_matrix(matrix)
    csr.sort_indices()
    return csr_tensor(
        torch.from_numpy(csr.indptr.astype(np.int64)),
        torch.from_numpy(csr.indices.astype(np.int64)),
        torch.from_numpy(csr.data).to(dtype),
        csr.shape,
    )


@dataclass
class SerialGraph:
    """The whole graph: each layer's matrix with its transpose, features, labels and split codes."""

    matrices: list[tuple[torch.Tensor, torch.Tensor]]
    features: torch.Tensor
    labels: torch.Tensor
    split: torch.Tensor
    num_classes: int
    residual_rows: list[torch.Tensor | None] | None = None
    """Per layer, the input row of each output row (a residual across node orders); None: the same."""

    @classmethod
    def from_scipy(
        cls,
        adjacency: sp.spmatrix,
        features: np.ndarray,
        labels: np.ndarray,
        split: np.ndarray,
        num_classes: int,
        layers: int,
        dtype: torch.dtype,
    ) -> SerialGraph:
        """Every layer multiplies by the same `adjacency` (the unpermuted graph)."""
        pair = (torch_csr(adjacency, dtype), torch_csr(sp.csr_matrix(adjacency).T, dtype))
        return cls(
            [pair] * layers,
            torch.from_numpy(np.asarray(features)).to(dtype),
            torch.from_numpy(np.asarray(labels, dtype=np.int64)),
            torch.from_numpy(np.asarray(split, dtype=np.int8)),
            num_classes,
        )

    def to(self, device: torch.device) -> SerialGraph:
        """The same graph on `device`."""
        matrices = [(matrix.to(device), transpose.to(device)) for matrix, transpose in self.matrices]
        features, labels, split = (t.to(device) for t in (self.features, self.labels, self.split))
        moved = self.residual_rows and [
            None if rows is None else rows.to(device) for rows in self.residual_rows
        ]
        return SerialGraph(matrices, features, labels, split, self.num_classes, moved)

    @classmethod
    def from_rank_data(cls, data: RankData, dtype: torch.dtype) -> SerialGraph:
        """The graph as the only rank of a 1x1x1 grid loads it (stored order, A0/A1 alternating)."""
        n = data.meta.num_nodes
        shards = [data.shard(layer) for layer in range(data.layers)]
        matrices = [(shard.matrix.to(dtype), shard.transpose.to(dtype)) for shard in shards]
        features = data.features[:n].to(dtype)
        return cls(matrices, features, data.labels[:n], data.split[:n], data.meta.num_classes)


@dataclass
class SerialSample:
    """One mini-batch step of the serial model: the sorted sampled `nodes`, their rescaled induced
    subgraph (matrix and transpose), and the step's number (which keys its dropout masks)."""

    nodes: torch.Tensor
    matrix: tuple[torch.Tensor, torch.Tensor]
    step: int


class SerialGCN:
    """The model of `config` (gcn or the ScaleGNN stack, with its switches) with its optimizer."""

    def __init__(self, graph: SerialGraph, config: TrainConfig, torch_dropout: bool = False):
        self.graph = graph
        self.config = config
        self.torch_dropout = torch_dropout
        model, dtype = config.model, config.torch_dtype
        features = graph.features
        if model.normalize_features == "row":
            norms = features.abs().sum(dim=1, keepdim=True)
            features = features / torch.where(norms > 0, norms, torch.ones_like(norms))
        self.features = features.clone().requires_grad_(model.learnable_features)
        full = initial_parameters(model, config.runtime.seed, features.shape[1], graph.num_classes, dtype)
        self.parameters = {name: value.to(features.device).requires_grad_() for name, value in full.items()}
        self.weights = [self.parameters[f"weight.{layer}"] for layer in range(model.layers)]
        self.dims = model.widths(features.shape[1], graph.num_classes)
        self.blocks = model.layers if model.components.output_head else model.layers - 1
        matrices = [p for name, p in self.parameters.items() if not is_vector(name)]
        vectors = [p for name, p in self.parameters.items() if is_vector(name)]
        later = matrices[1:] + ([self.features] if model.learnable_features else [])
        later_decay = 0.0 if config.optimizer.weight_decay_first_only else config.optimizer.weight_decay
        kind = torch.optim.AdamW if config.optimizer.algorithm == "adamw" else torch.optim.Adam
        groups = [
            {"params": matrices[:1], "weight_decay": config.optimizer.weight_decay},
            {"params": later, "weight_decay": later_decay},
            {"params": vectors, "weight_decay": 0.0},
        ]
        self.optimizer = kind(groups, lr=config.optimizer.lr)
        labelled = graph.labels >= 0
        self.masks = {name: labelled & (graph.split == code) for name, code in SPLIT_CODES.items()}

    def _dropout(self, x: torch.Tensor, index: int, epoch: int, step: int | None) -> torch.Tensor:
        """Dropout of the input of GCN layer `index` (0: the features; L: the output head's)."""
        rate = self.config.model.dropout_rate
        if self.torch_dropout:
            return torch.nn.functional.dropout(x, rate)
        rows, width = x.shape
        spec = MaskSpec.of(self.config.runtime.seed, index, epoch, rate, width, step)
        return x * torch.where(keep_mask(spec, (0, rows, 0, width), x.device), spec.keep_value, 0.0)

    def _dense(self, x: torch.Tensor, name: str) -> torch.Tensor:
        x = x @ self.parameters[f"{name}.weight"]
        bias = self.parameters.get(f"{name}.bias")
        return x if bias is None else x + bias

    def forward(self, epoch: int, training: bool, sample: SerialSample | None = None) -> torch.Tensor:
        """Logits of every node (rows in the order of the last layer's matrix), or of the `sample`'s nodes
        (every layer multiplies by its subgraph; masks keyed by the nodes' places in the sample)."""
        return self.hidden_and_logits(epoch, training, sample)[1]

    def hidden_and_logits(
        self, epoch: int, training: bool, sample: SerialSample | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The output head's input (the last GCN layer's without a head: `gtool predict --embeddings`) and
        the logits, as `forward`."""
        model = self.config.model
        parts = model.components
        dropping = training and model.dropout_rate > 0
        matrices, moved = self.graph.matrices, self.graph.residual_rows
        x = self.features
        if sample is not None:
            x, matrices = x[sample.nodes], [sample.matrix] * model.layers
            moved = [None] * model.layers
        step = None if sample is None else sample.step
        if dropping:
            x = self._dropout(x, 0, epoch, step)
        if parts.input_projection:
            x = self._dense(x, "projection")
        for layer, (matrix, transpose) in enumerate(matrices):
            z = _SparseMatmul.apply(x, matrix, transpose) @ self.weights[layer]
            if f"bias.{layer}" in self.parameters:
                z = z + self.parameters[f"bias.{layer}"]
            if layer >= self.blocks:
                return x, z
            if parts.norm:
                wide = z.to(torch.promote_types(z.dtype, torch.float32))
                inverse = torch.rsqrt(wide.square().mean(dim=1, keepdim=True) + NORM_EPS)
                z = (wide * inverse * self.parameters[f"scale.{layer}"]).to(z.dtype)
            y = torch.relu(z)
            if dropping:
                y = self._dropout(y, layer + 1, epoch, step)
            if parts.residual and self.dims[layer] == self.dims[layer + 1]:
                rows = moved[layer] if moved is not None else None
                y = y + (x if rows is None else x[rows])
            x = y
        return x, self._dense(x, "head")

    def _loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(logits, labels)

    def train_epoch(self, epoch: int) -> float:
        """One step; returns the training loss (mean cross-entropy over labelled training nodes)."""
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.forward(epoch, training=True)
        train = self.masks["train"]
        loss = torch.nn.functional.cross_entropy(logits[train], self.graph.labels[train])
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())

    def train_round(self, epoch: int, samples: list[SerialSample]) -> list[float]:
        """One mini-batch update from the mean of the `samples`' gradients (the replicas of a round); each
        sample's loss is the mean cross-entropy over its labelled training nodes (0 when it has none)."""
        self.optimizer.zero_grad(set_to_none=True)
        losses = []
        for sample in samples:
            logits = self.forward(epoch, training=True, sample=sample)
            labels = self.graph.labels[sample.nodes]
            train = self.masks["train"][sample.nodes]
            if bool(train.any()):
                loss = torch.nn.functional.cross_entropy(logits[train], labels[train])
            else:
                loss = logits.sum() * 0.0
            (loss / len(samples)).backward()
            losses.append(float(loss.detach()))
        self.optimizer.step()
        return losses

    def evaluate(self) -> dict[str, float]:
        """Accuracy per split without dropout."""
        with torch.no_grad():
            predicted = self.forward(0, training=False).argmax(dim=1)
        correct = predicted == self.graph.labels
        return {name: float(correct[mask].double().mean()) for name, mask in self.masks.items()}
