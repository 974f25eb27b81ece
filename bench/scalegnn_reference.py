"""An independent plain-PyTorch ScaleGNN: the reference of bench/bench_accuracy.py.

ScaleGNN's model (its section III-A, as docs/3d-gcn.md writes it) on the unpermuted graph, written from
that description alone: nothing of gtool's trainer is imported (no initial values, masks or optimizer),
only the store's graph, features, labels and split through gtool's public readers.

    h   = X W_in + b_in                                   input projection (features -> hidden)
    h  += dropout(ReLU(RMSNorm(Â h W_l + b_l) * g_l))    each GCN layer l, a residual block
    out = h W_out + b_out                                 output head (hidden -> classes)

Glorot-uniform weights, a zero head, zero biases and norm scales 0.1 (docs/train.md, "Models");
torch.nn.functional.dropout at `dropout` on the features (on their nonzeros, as they are kept sparse: the
same as on the dense matrix) and on every block's output; torch.optim.Adam
with L2 weight decay on the weights (not on biases and norm scales); 200 full-graph epochs, the test
accuracy at the first epoch of best validation accuracy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F

import gtool

NORM_EPS = 1e-6
NORM_SCALE = 0.1
SPLITS = {"train": 0, "valid": 1, "test": 2}


@dataclass(frozen=True)
class Hyper:
    """The run's settings (the bench's: the issue's citation-graph setting)."""

    layers: int
    hidden: int = 64
    dropout: float = 0.5
    lr: float = 0.01
    weight_decay: float = 5e-4
    epochs: int = 200


@dataclass
class Graph:
    """Â and the row-normalized features as torch sparse (COO) matrices, labels and split masks."""

    adjacency: torch.Tensor
    features: torch.Tensor
    labels: torch.Tensor
    masks: dict[str, torch.Tensor]
    num_classes: int

    @classmethod
    def of_store(cls, store: str) -> Graph:
        """The store's graph in original node order (its stored Â: normalized, with self-loops)."""
        matrix = sp.coo_matrix(gtool.to_scipy(store))
        indices = torch.from_numpy(np.vstack([matrix.row, matrix.col]).astype(np.int64))
        values = torch.from_numpy(matrix.data.astype(np.float32))
        adjacency = sparse(indices, values, matrix.shape)
        features = torch.from_numpy(gtool.features(store)).float()
        norms = features.abs().sum(dim=1, keepdim=True)
        features = (features / torch.where(norms > 0, norms, torch.ones_like(norms))).to_sparse().coalesce()
        labels = torch.from_numpy(gtool.labels(store))
        split = torch.from_numpy(gtool.split(store))
        masks = {name: (split == code) & (labels >= 0) for name, code in SPLITS.items()}
        return cls(adjacency, features, labels, masks, int(labels.max()) + 1)


def sparse(indices: torch.Tensor, values: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """A torch sparse COO matrix of `values` at `indices` (valid: no invariant checks)."""
    return torch.sparse_coo_tensor(indices, values, shape, check_invariants=False).coalesce()


def feature_dropout(x: torch.Tensor, rate: float, training: bool) -> torch.Tensor:
    """F.dropout of the sparse features: on their nonzeros (a dropped zero stays zero)."""
    return sparse(x.indices(), F.dropout(x.values(), rate, training), x.shape)


class ScaleGNN(torch.nn.Module):
    """Input projection, `layers` residual GCN blocks (RMSNorm, ReLU, dropout), output head."""

    def __init__(self, features: int, hidden: int, classes: int, layers: int, dropout: float):
        super().__init__()
        self.dropout = dropout
        self.projection = torch.nn.Linear(features, hidden)
        self.convs = torch.nn.ModuleList(torch.nn.Linear(hidden, hidden) for _ in range(layers))
        self.scales = torch.nn.ParameterList(
            torch.nn.Parameter(torch.full((hidden,), NORM_SCALE)) for _ in range(layers)
        )
        self.head = torch.nn.Linear(hidden, classes)
        for linear in [self.projection, *self.convs]:
            torch.nn.init.xavier_uniform_(linear.weight)
            torch.nn.init.zeros_(linear.bias)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    def forward(self, x: torch.Tensor, adjacency: torch.Tensor) -> torch.Tensor:
        x = feature_dropout(x, self.dropout, self.training)
        h = torch.sparse.mm(x, self.projection.weight.T) + self.projection.bias
        for conv, scale in zip(self.convs, self.scales, strict=True):
            z = conv(adjacency @ h)
            z = z * torch.rsqrt(z.square().mean(dim=1, keepdim=True) + NORM_EPS) * scale
            h = h + F.dropout(torch.relu(z), self.dropout, self.training)
        return self.head(h)

    def parameter_groups(self, weight_decay: float) -> list[dict]:
        """Weights decayed, biases and norm scales not."""
        vectors = [p for p in self.parameters() if p.dim() == 1]
        matrices = [p for p in self.parameters() if p.dim() > 1]
        return [{"params": matrices, "weight_decay": weight_decay}, {"params": vectors, "weight_decay": 0.0}]


def accuracies(model: torch.nn.Module, graph: Graph) -> dict[str, float]:
    """Accuracy per split, dropout off."""
    model.eval()
    with torch.no_grad():
        predicted = model(graph.features, graph.adjacency).argmax(dim=1)
    model.train()
    correct = predicted == graph.labels
    return {name: float(correct[mask].float().mean()) for name, mask in graph.masks.items()}


def test_at_best_valid(model: torch.nn.Module, graph: Graph, hyper: Hyper, groups: list[dict]) -> float:
    """Train `model` full-graph with Adam over `groups`; the test accuracy at the first best validation."""
    optimizer = torch.optim.Adam(groups, lr=hyper.lr)
    train = graph.masks["train"]
    best_valid, test = -1.0, float("nan")
    for _ in range(hyper.epochs):
        optimizer.zero_grad()
        logits = model(graph.features, graph.adjacency)
        F.cross_entropy(logits[train], graph.labels[train]).backward()
        optimizer.step()
        scores = accuracies(model, graph)
        if scores["valid"] > best_valid:
            best_valid, test = scores["valid"], scores["test"]
    return test


def train(graph: Graph, hyper: Hyper, seed: int) -> float:
    """The reference ScaleGNN trained with `seed` (initial weights and dropout): its test accuracy."""
    torch.manual_seed(seed)
    model = ScaleGNN(graph.features.shape[1], hyper.hidden, graph.num_classes, hyper.layers, hyper.dropout)
    return test_at_best_valid(model, graph, hyper, model.parameter_groups(hyper.weight_decay))
