"""A model of your own from gtool's 3D-parallel blocks: gtool train STORE --model examples/stack.py:build

Three GCN layers with RMSNorm, ReLU and dropout, a skip from layer 0's output to layer 2's input, and an
output head. `build(grid)` runs on every rank and builds the same stack; each block takes the layout of
its input and gives its output's (`.output`), so the stack is written by chaining layouts. gtool train
gives it everything its own models have: any grid, mini-batches, checkpoints, predict, logs; its
--hidden and --dropout reach it as `grid.options`.
"""

import torch

from gtool.trainer import Bias, Dropout, GCNConv, Linear, NormReluDropout, Skip


class Stack(torch.nn.Module):
    """The model; `output` names the logits' layout (as wide as the store's classes)."""

    def __init__(self, grid, hidden, dropout):
        super().__init__()
        x = grid.input
        self.drop = Dropout(grid, x, dropout)
        self.conv0 = GCNConv(grid, x, hidden)
        h0 = self.conv0.output
        self.act0 = NormReluDropout(grid, h0, p=dropout)
        self.conv1 = GCNConv(grid, h0, hidden, transform_first=True)
        h1 = self.conv1.output
        self.skip = Skip(grid, h0, h1)  # h0 moved to h1's layout (roles and node order)
        self.act1 = NormReluDropout(grid, h1, p=dropout)
        self.conv2 = GCNConv(grid, h1, hidden)
        self.bias2 = Bias(grid, self.conv2.output)
        self.head = Linear(grid, self.conv2.output, grid.store.num_classes)
        self.output = self.head.output

    def forward(self, x):
        h0 = self.act0(self.conv0(self.drop(x)))
        h1 = self.act1(self.conv1(h0), residual=self.skip(h0))
        return self.head(torch.relu(self.bias2(self.conv2(h1))))


def build(grid):
    """The stack on this rank's grid (what --model examples/stack.py:build calls)."""
    return Stack(grid, grid.options.hidden, grid.options.dropout_rate)
