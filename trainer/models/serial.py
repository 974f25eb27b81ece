"""A plain single-process GCN on the whole graph with torch.sparse: the reference for tests and benchmarks.

It shares with the parallel trainer only what defines the model (initial weights, dropout masks, drawn
here by the plain-torch specification `keep_mask`) and uses torch.optim, so it checks the trainer's own
Adam, dropout kernels and parallel machinery. With `torch_dropout` it draws its masks with F.dropout
instead, as a plain PyTorch GCN does (the benchmarks' reference).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
import scipy.sparse as sp
import torch

from gtool.architecture import ModelConfig
from gtool.loader import RankData, csr_tensor
from gtool.store.layout import SPLIT_CODES
from gtool.trainer.config import TrainConfig
from gtool.trainer.models.places import initial_parameters
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
        assert data.features is not None and all(shard.transpose is not None for shard in shards)
        transposes = [cast(torch.Tensor, shard.transpose) for shard in shards]
        matrices = [(s.matrix.to(dtype), t.to(dtype)) for s, t in zip(shards, transposes, strict=True)]
        features = data.features[:n].to(dtype)
        return cls(matrices, features, data.labels[:n], data.split[:n], data.meta.num_classes)


@dataclass
class SerialSample:
    """One mini-batch step of the serial model: the sorted sampled `nodes`, their rescaled induced
    subgraph (matrix and transpose), and the step's number (which keys its dropout masks)."""

    nodes: torch.Tensor
    matrix: tuple[torch.Tensor, torch.Tensor]
    step: int


class SerialContext:
    """What the serial twins run in: the graph's matrices (or a sample's), the rows a residual takes across
    node orders, the epoch and step that key dropout masks, and whether masks draw with F.dropout."""

    def __init__(self, graph: SerialGraph, epoch: int, sample: SerialSample | None, torch_dropout: bool):
        layers = len(graph.matrices)
        self.matrices = graph.matrices if sample is None else [sample.matrix] * layers
        self.moved = graph.residual_rows if sample is None else None
        self.epoch = epoch
        self.step = None if sample is None else sample.step
        self.torch_dropout = torch_dropout


class SerialDropout(torch.nn.Module):
    """`blocks.Dropout`'s twin: the same masks by row index of the whole graph (or the sample)."""

    def __init__(self, p: float, key: int, seed: int):
        super().__init__()
        self.p, self.key, self.seed = p, key, seed

    def drop(self, x: torch.Tensor, context: SerialContext) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        if context.torch_dropout:
            return torch.nn.functional.dropout(x, self.p)
        rows, width = x.shape
        spec = MaskSpec.of(self.seed, self.key, context.epoch, self.p, width, context.step)
        return x * torch.where(keep_mask(spec, (0, rows, 0, width), x.device), spec.keep_value, 0.0)

    def forward(self, x: torch.Tensor, context: SerialContext) -> torch.Tensor:
        return self.drop(x, context)


class SerialNormReluDropout(SerialDropout):
    """`blocks.NormReluDropout`'s twin: RMSNorm (if a scale), ReLU, dropout, plus the residual."""

    def __init__(self, p: float, key: int, seed: int, scale: torch.Tensor | None):
        super().__init__(p, key, seed)
        if scale is not None:
            self.scale = torch.nn.Parameter(scale)

    def forward(
        self, z: torch.Tensor, context: SerialContext, residual: torch.Tensor | None = None
    ) -> torch.Tensor:
        if hasattr(self, "scale"):
            wide = z.to(torch.promote_types(z.dtype, torch.float32))
            inverse = torch.rsqrt(wide.square().mean(dim=1, keepdim=True) + NORM_EPS)
            z = (wide * inverse * self.scale).to(z.dtype)
        y = self.drop(torch.relu(z), context)
        return y if residual is None else y + residual


class SerialGCNConv(torch.nn.Module):
    """`blocks.GCNConv`'s twin: (A X) W with layer `layer`'s matrix of the context."""

    def __init__(self, weight: torch.Tensor, layer: int):
        super().__init__()
        self.weight = torch.nn.Parameter(weight)
        self.layer = layer

    def forward(self, x: torch.Tensor, context: SerialContext) -> torch.Tensor:
        matrix, transpose = context.matrices[self.layer]
        return _SparseMatmul.apply(x, matrix, transpose) @ self.weight


class SerialLinear(torch.nn.Module):
    """`blocks.Linear`'s twin: X W."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.weight = torch.nn.Parameter(weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight


class SerialBias(torch.nn.Module):
    """`blocks.Bias`'s twin."""

    def __init__(self, value: torch.Tensor):
        super().__init__()
        self.bias = torch.nn.Parameter(value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.bias


class SerialStack(torch.nn.Module):
    """`stack.Stack`'s twin, built from the twins with the same names, so that their parameters pair."""

    def __init__(self, config: ModelConfig, seed: int, features: torch.Tensor, num_classes: int):
        super().__init__()
        parts, rate, num_features = config.components, config.dropout_rate, features.shape[1]
        initial = initial_parameters(config, seed, num_features, num_classes, features.dtype)
        full = {name: value.to(features.device) for name, value in initial.items()}
        self.dims = config.widths(num_features, num_classes)
        self.input_dropout = SerialDropout(rate, 0, seed)
        self.projection = SerialLinear(full["projection.weight"]) if parts.input_projection else None
        has_projection_bias = parts.input_projection and parts.bias
        self.projection_bias = SerialBias(full["projection.bias"]) if has_projection_bias else None
        self.convs = torch.nn.ModuleList(SerialGCNConv(full[f"weight.{i}"], i) for i in range(config.layers))
        self.biases = torch.nn.ModuleList(
            SerialBias(full[f"bias.{i}"]) for i in range(config.layers) if parts.bias
        )
        blocks = config.layers if parts.output_head else config.layers - 1
        self.acts = torch.nn.ModuleList(
            SerialNormReluDropout(rate, i + 1, seed, full.get(f"scale.{i}")) for i in range(blocks)
        )
        self.residual = [parts.residual and self.dims[i] == self.dims[i + 1] for i in range(blocks)]
        self.head = SerialLinear(full["head.weight"]) if parts.output_head else None
        self.head_bias = SerialBias(full["head.bias"]) if parts.output_head and parts.bias else None

    def forward(self, x: torch.Tensor, context: SerialContext) -> tuple[torch.Tensor, torch.Tensor]:
        """The output head's input (the last GCN layer's without a head) and the logits."""
        x = self.input_dropout(x, context)
        if self.projection is not None:
            x = self.projection(x)
            if self.projection_bias is not None:
                x = self.projection_bias(x)
        for layer, conv in enumerate(self.convs):
            z = conv(x, context)
            if len(self.biases):
                z = self.biases[layer](z)
            if layer >= len(self.acts):
                return x, z
            residual = None
            if self.residual[layer]:
                rows = None if context.moved is None else context.moved[layer]
                residual = x if rows is None else x[rows]
            x = self.acts[layer](z, context, residual)
        assert self.head is not None
        logits = self.head(x)
        return x, logits if self.head_bias is None else self.head_bias(logits)


class SerialFeatures(torch.nn.Module):
    """`features.Features`'s twin: the whole graph's input features, learned or not."""

    def __init__(self, features: torch.Tensor, learnable: bool):
        super().__init__()
        self.features = torch.nn.Parameter(features.clone()) if learnable else None
        self.given = features

    def block(self) -> torch.Tensor:
        return self.given if self.features is None else self.features


class SerialNetwork(torch.nn.Module):
    """`network.Network`'s twin: the input features (learned or not) and the serial stack."""

    def __init__(self, graph: SerialGraph, config: TrainConfig):
        super().__init__()
        model = config.model
        features = graph.features
        if model.normalize_features == "row":
            norms = features.abs().sum(dim=1, keepdim=True)
            features = features / torch.where(norms > 0, norms, torch.ones_like(norms))
        self.features = SerialFeatures(features, model.learnable_features)
        self.model = SerialStack(model, config.runtime.seed, features, graph.num_classes)

    def input_block(self) -> torch.Tensor:
        return self.features.block()


class SerialGCN:
    """The model of `config` (gcn or the ScaleGNN stack, with its switches) with its optimizer: the
    serial twin of a run (its parameters by the parallel network's names)."""

    def __init__(self, graph: SerialGraph, config: TrainConfig, torch_dropout: bool = False):
        self.graph = graph
        self.config = config
        self.torch_dropout = torch_dropout
        self.network = SerialNetwork(graph, config)
        self.parameters = dict(self.network.named_parameters())
        matrices = [p for name, p in self.parameters.items() if p.dim() == 2 and name != "features.features"]
        learned = [p for name, p in self.parameters.items() if name == "features.features"]
        vectors = [p for p in self.parameters.values() if p.dim() == 1]
        later_decay = 0.0 if config.optimizer.weight_decay_first_only else config.optimizer.weight_decay
        kind = torch.optim.AdamW if config.optimizer.algorithm == "adamw" else torch.optim.Adam
        groups = [
            {"params": matrices[:1], "weight_decay": config.optimizer.weight_decay},
            {"params": matrices[1:] + learned, "weight_decay": later_decay},
            {"params": vectors, "weight_decay": 0.0},
        ]
        self.optimizer = kind(groups, lr=config.optimizer.lr)
        labelled = graph.labels >= 0
        self.masks = {name: labelled & (graph.split == code) for name, code in SPLIT_CODES.items()}

    def forward(self, epoch: int, training: bool, sample: SerialSample | None = None) -> torch.Tensor:
        """Logits of every node (rows in the order of the last layer's matrix), or of the `sample`'s nodes
        (every layer multiplies by its subgraph; masks keyed by the nodes' places in the sample)."""
        return self.hidden_and_logits(epoch, training, sample)[1]

    def hidden_and_logits(
        self, epoch: int, training: bool, sample: SerialSample | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The output head's input (the last GCN layer's without a head: `gtool predict --embeddings`) and
        the logits, as `forward`."""
        self.network.train(training)
        x = self.network.input_block()
        if sample is not None:
            x = x[sample.nodes]
        context = SerialContext(self.graph, epoch, sample, self.torch_dropout)
        return self.network.model(x, context)

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
