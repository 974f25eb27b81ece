"""Heatmaps of tile nonzeros: one panel per stored matrix, written as a PNG (no display needed)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

PANEL_INCHES = 4.6


def plot_tile_nnz(panels: dict[str, np.ndarray], path: str, title: str) -> None:
    """Write a heatmap per T x T count array (keyed by panel name) to `path`, max/mean in each title."""
    figure = Figure(figsize=(PANEL_INCHES * len(panels) + 0.4, PANEL_INCHES + 0.6), layout="constrained")
    figure.suptitle(title)
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
    for ax, (name, counts) in zip(axes, panels.items(), strict=True):
        mean = counts.mean()
        ratio = counts.max() / mean if mean else 0.0
        image = ax.imshow(counts, cmap="viridis", vmin=0, interpolation="nearest")
        ax.set_title(f"{name}: max/mean {ratio:.3f}")
        ax.set_xlabel("column tile j")
        ax.set_ylabel("row tile i")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        figure.colorbar(image, ax=ax, shrink=0.85, label="nonzeros per tile")
    figure.savefig(path, dpi=120)
