"""The benchmarks' PyG GCN: trainer/serial.py's plain GCN with torch_geometric's GCNConv layers.

The same initial weights, F.dropout on every layer's input, ReLU between layers, loss and torch.optim
Adam as the plain reference; each layer is a GCNConv (normalize=False and no bias: the store's matrices
are already normalized) given the layer's sparse CSR matrix as its adjacency, so PyG computes
A @ (X W) with its own sparse product.
"""

from __future__ import annotations

import torch
from torch_geometric.nn import GCNConv

from gtool.trainer.config import TrainConfig
from gtool.trainer.models.serial import SerialGCN, SerialGraph


class PygGCN(SerialGCN):
    """SerialGCN's model, optimizer and training step with its layers as GCNConv modules."""

    def __init__(self, graph: SerialGraph, config: TrainConfig):
        super().__init__(graph, config, torch_dropout=True)
        self.convs = []
        for weight in self.weights:
            conv = GCNConv(weight.shape[0], weight.shape[1], normalize=False, bias=False)
            conv.lin.weight = torch.nn.Parameter(weight.detach().T.contiguous())
            self.convs.append(conv.to(weight.device))
        decay = config.optimizer.weight_decay
        later = 0.0 if config.optimizer.weight_decay_first_only else decay
        groups = [
            {"params": list(self.convs[0].parameters()), "weight_decay": decay},
            {"params": [p for conv in self.convs[1:] for p in conv.parameters()], "weight_decay": later},
        ]
        self.optimizer = type(self.optimizer)(groups, lr=config.optimizer.lr)

    def forward(self, epoch: int, training: bool) -> torch.Tensor:
        x, rate = self.features, self.config.model.dropout
        for layer, conv in enumerate(self.convs):
            if training and rate > 0:
                x = torch.nn.functional.dropout(x, rate)
            x = conv(x, self.graph.matrices[layer][0])
            if layer < len(self.convs) - 1:
                x = torch.relu(x)
        return x
