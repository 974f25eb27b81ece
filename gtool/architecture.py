"""The GCN a run trains, described once: the trainer builds it, the planner prices it, stats sizes it."""

from __future__ import annotations

from dataclasses import dataclass

from gtool.geometry.layers import (
    AGGREGATE_FIRST,
    TRANSFORM_FIRST,
    LayerOrders,
    layer_widths,
    narrowing_layers,
)
from gtool.options import Options, option

DTYPE_BYTES = {"float32": 4, "float64": 8}
FEATURE_NORMALIZATIONS = ("none", "row")
COMM_DTYPE_BYTES = {"same": None, "bf16": 2}
"""What the 3D all-reduces may carry, and its bytes per element (None: the training dtype's)."""
LAYER_ORDER_POLICIES = ("auto", AGGREGATE_FIRST, TRANSFORM_FIRST)
"""auto: A (F W) in the layers whose output is narrower than their input, (A F) W in the others; or one
order in every layer."""


@dataclass(frozen=True)
class ModelConfig(Options):
    """A GCN of `layers` layers (no bias; ReLU between layers, none after the last), as trained."""

    layers: int = option(3, "GCN layers.", minimum=1, short="-l")
    hidden: int = option(128, "Width of the hidden layers.", minimum=1)
    dropout: float = option(0.5, "Dropout rate on every layer's input.", minimum=0.0, below=1.0)
    learnable_features: bool = option(False, "Train the input features as embeddings (sharded).")
    normalize_features: str = option(
        "none", "none, or row: divide each row by its L1 norm.", choices=FEATURE_NORMALIZATIONS
    )
    agg_blocks: int = option(1, "Row blocks per SpMM, each reduced while the next is computed.", minimum=1)
    dtype: str = option("float32", "float32 or float64.", choices=tuple(DTYPE_BYTES))
    comm_dtype: str = option(
        "same",
        "What the all-reduces of H, Q, dH and dF carry: same (the training dtype) or bf16.",
        choices=tuple(COMM_DTYPE_BYTES),
    )
    layer_order: str = option(
        "auto",
        "auto: a layer whose output is narrower than its input multiplies by its weight first, A (F W), so "
        "that its SpMMs run at the narrower width; aggregate-first: (A F) W in every layer; "
        "transform-first: A (F W) in every layer.",
        choices=LAYER_ORDER_POLICIES,
    )

    @property
    def itemsize(self) -> int:
        """Bytes of one value of the training dtype."""
        return DTYPE_BYTES[self.dtype]

    @property
    def wire_itemsize(self) -> int | None:
        """Bytes of one value in the all-reduces of H, Q, dH and dF when they are cast (bf16), else None."""
        return COMM_DTYPE_BYTES[self.comm_dtype]

    def widths(self, num_features: int, num_classes: int) -> list[int]:
        """D_0 .. D_L: input features, `hidden` between layers, classes."""
        return layer_widths(num_features, self.hidden, num_classes, self.layers)

    def orders(self, num_features: int, num_classes: int) -> LayerOrders:
        """Per layer, whether it multiplies by its weight first (transform-first), under --layer-order."""
        if self.layer_order == "auto":
            return narrowing_layers(self.widths(num_features, num_classes))
        return (self.layer_order == TRANSFORM_FIRST,) * self.layers
