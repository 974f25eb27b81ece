"""The model a run trains, described once: the trainer builds it, the planner prices it, stats sizes it."""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from pathlib import Path

from gtool.errors import GtoolError
from gtool.geometry.grid import ProcessGrid
from gtool.geometry.layers import (
    AGGREGATE_FIRST,
    TRANSFORM_FIRST,
    XYZ,
    LayerOrders,
    Roles,
    linear_geometry,
    narrowing_layers,
    roles_after,
    roles_after_linear,
)
from gtool.geometry.shapes import LayerShape, StackParts, layer_shapes
from gtool.options import Options, option

DTYPE_BYTES = {"float32": 4, "float64": 8}
FEATURE_NORMALIZATIONS = ("none", "row")
COMM_DTYPE_BYTES = {"same": None, "bf16": 2}
"""What the 3D all-reduces may carry, and its bytes per element (None: the training dtype's)."""
LAYER_ORDER_POLICIES = ("auto", AGGREGATE_FIRST, TRANSFORM_FIRST)
"""auto: A (F W) in the layers whose output is narrower than their input, (A F) W in the others; or one
order in every layer."""
MODELS = ("gcn", "scalegnn")
DEFAULT_DROPOUT = {"full-graph": 0.5, "mini-batch": 0.1}
"""Measured on sbm:20000:4 (docs/train.md, "Models"): a mini-batch step's sampled subgraph already drops
about 90% of each node's neighbours, and 0.5 more on top trains 5 points below full-graph in 20 epochs."""
NORMS = ("rms", "none")


def parse_model(text: str, flag: str = "--model") -> str:
    """gcn, scalegnn, or FILE.py:NAME (a user's model; its file made absolute, as ranks run elsewhere)."""
    if text in MODELS:
        return text
    path, colon, name = text.rpartition(":")
    if not colon or not path.endswith(".py") or not name.isidentifier():
        raise ValueError(f"{flag} must be one of {', '.join(MODELS)} or FILE.py:NAME, got {text!r}")
    return f"{Path(path).expanduser().absolute()}:{name}"


def refuse_missing_model(spec: str) -> None:
    """A GtoolError when a user's model FILE.py:NAME names no file, or a file that defines no top-level
    NAME (read, not imported: checked before any rank starts, without torch)."""
    path, _, name = spec.rpartition(":")
    source = Path(path)
    if not source.is_file():
        raise GtoolError(f"--model {spec}: no file {source}")
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
    except (SyntaxError, UnicodeDecodeError, OSError) as exc:
        raise GtoolError(f"--model {spec}: {source} cannot be read as Python ({exc})") from None
    defined = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    assigned = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    if name not in defined | assigned:
        raise GtoolError(f"--model {spec}: {source} defines no {name}")


@dataclass(frozen=True)
class Components:
    """The parts of a model around its GCN layers, each on or off (docs/train.md, "Models")."""

    input_projection: bool
    norm: bool
    residual: bool
    bias: bool
    output_head: bool


MODEL_COMPONENTS = {
    "gcn": Components(input_projection=False, norm=False, residual=False, bias=False, output_head=False),
    "scalegnn": Components(input_projection=True, norm=True, residual=True, bias=True, output_head=True),
}
"""What each model has unless a switch says otherwise."""
COMPONENT_OPTIONS = ("model", "input_projection", "norm", "residual", "bias", "output_head")
"""ModelConfig's options that choose the model and its components (what gtool plan and stats take)."""


@dataclass(frozen=True)
class ModelConfig(Options):
    """The model trained: `layers` GCN layers, with the components its model (gcn or scalegnn) has unless
    a switch overrides one."""

    model: str = option(
        "gcn",
        "gcn: GCN layers with ReLU and dropout between them; scalegnn: an input projection, GCN layers each "
        "followed by RMSNorm, ReLU, dropout and a residual add, and an output head (all with bias); "
        "FILE.py:NAME: the model function NAME of FILE.py builds from gtool's blocks (examples/stack.py).",
        parse=parse_model,
        metavar="MODEL",
        shown_default="gcn",
    )
    layers: int = option(3, "GCN layers (in either model).", minimum=1, short="-l")
    hidden: int = option(128, "Width of the hidden layers.", minimum=1)
    dropout: float | None = option(
        None,
        "Dropout rate on every layer's input (default: 0.5 full-graph, 0.1 mini-batch, whose sampled "
        "subgraphs already regularize).",
        minimum=0.0,
        below=1.0,
    )
    learnable_features: bool = option(False, "Train the input features as embeddings (sharded).")
    normalize_features: str = option(
        "none", "none, or row: divide each row by its L1 norm.", choices=FEATURE_NORMALIZATIONS
    )
    input_projection: bool | None = option(
        None, "A dense layer from the features to the hidden width first (default: the model's)."
    )
    norm: str | None = option(
        None,
        "rms: RMSNorm with a learnable scale after each hidden GCN layer; none (default: the model's).",
        choices=NORMS,
    )
    residual: bool | None = option(
        None, "Add each hidden GCN layer's input to its output where the widths match (default: the model's)."
    )
    bias: bool | None = option(None, "A learnable bias in every layer (default: the model's).")
    output_head: bool | None = option(
        None, "A dense layer from the hidden width to the classes last (default: the model's)."
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

    def for_mode(self, minibatch: bool) -> ModelConfig:
        """This model with its dropout rate decided when not given: DEFAULT_DROPOUT of the mode."""
        if self.dropout is not None:
            return self
        return replace(self, dropout=DEFAULT_DROPOUT["mini-batch" if minibatch else "full-graph"])

    @property
    def dropout_rate(self) -> float:
        """The dropout rate (before `for_mode` decides a default one: full-graph's)."""
        return DEFAULT_DROPOUT["full-graph"] if self.dropout is None else self.dropout

    @property
    def builtin(self) -> bool:
        """Whether the model is one of gtool's (else a user's FILE.py:NAME)."""
        return self.model in MODELS

    @property
    def components(self) -> Components:
        """The model's components, as its switches leave them (a user's model is priced as a GCN)."""
        defaults = MODEL_COMPONENTS.get(self.model, MODEL_COMPONENTS["gcn"])
        given = {
            "input_projection": self.input_projection,
            "norm": None if self.norm is None else self.norm == "rms",
            "residual": self.residual,
            "bias": self.bias,
            "output_head": self.output_head,
        }
        return Components(**{k: getattr(defaults, k) if v is None else v for k, v in given.items()})

    def widths(self, num_features: int, num_classes: int) -> list[int]:
        """D_0 .. D_L, the widths of the GCN layers' inputs and output: the features (the hidden width
        after an input projection), `hidden` between layers, the classes (`hidden` before an output head)."""
        parts = self.components
        first = self.hidden if parts.input_projection else num_features
        last = self.hidden if parts.output_head else num_classes
        return [first] + [self.hidden] * (self.layers - 1) + [last]

    @property
    def start(self) -> Roles:
        """The roles of the first GCN layer: (x, y, z), or those after the input projection."""
        return roles_after_linear(XYZ) if self.components.input_projection else XYZ

    def orders(self, num_features: int, num_classes: int) -> LayerOrders:
        """Per layer, whether it multiplies by its weight first (transform-first), under --layer-order."""
        if self.layer_order == "auto":
            return narrowing_layers(self.widths(num_features, num_classes))
        return (self.layer_order == TRANSFORM_FIRST,) * self.layers

    def shapes(
        self, grid: ProcessGrid, num_nodes: int, num_features: int, num_classes: int, rank: int = 0
    ) -> tuple[list[LayerShape], StackParts]:
        """The GCN layers' shapes on `grid` and the parts around them, as rank `rank` holds them (what the
        plan, stats and the tests price; the trainer's trainer.models.places holds the same geometry)."""
        orders = self.orders(num_features, num_classes)
        widths = self.widths(num_features, num_classes)
        shapes = layer_shapes(grid, num_nodes, widths, orders, self.start, rank)
        parts = self.components
        projection = linear_geometry(grid, rank, XYZ, num_nodes) if parts.input_projection else None
        last = shapes[-1]
        after = roles_after(last.roles, last.transform_first)
        head = linear_geometry(grid, rank, after, num_nodes) if parts.output_head else None
        stack = StackParts(
            projection, head, num_features, self.hidden, num_classes, parts.bias, parts.norm, parts.residual
        )
        return shapes, stack
