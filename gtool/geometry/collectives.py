"""Every collective of one training step of `gtool train`, exactly as gtool.trainer issues them: their
names (the groups and kinds of `comm_bytes` in the log), groups and operand sizes, for the trainer's
counters, `gtool stats` and the plan alike (`_layer_collectives` lists them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gtool.geometry.grid import AXES
from gtool.geometry.layers import LinearGeometry, roles_after
from gtool.geometry.shapes import GCN_PARTS, LayerShape, StackParts

DATA = "data"
"""The group of the ranks that hold the same part in the D replicas of the grid (--data-parallel)."""
GROUPS = (*AXES, "all", DATA)
"""Group names: the three grid axes, every rank of the run (or of its replica of the grid: a residual's
all-to-all), and the replicas of a rank's part."""
KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
"""Collective kinds, in the order `comm_bytes` lists them."""


DATA_AXIS = len(AXES)
"""The `axis` of a collective between the replicas of the grid (--data-parallel): group `data`."""
ALL_AXIS = DATA_AXIS + 1
"""The `axis` of a collective among every rank of a replica of the grid (a residual's all-to-all): `all`."""


@dataclass(frozen=True)
class Collective:
    """One collective every rank takes part in, in its group along `axis` (of `group_size` ranks)."""

    layer: int
    phase: str
    operand: str
    kind: str
    axis: int
    group_size: int
    elements: int
    itemsize: int | None = None
    """Bytes per element when the collective carries a dtype of its own (bf16), else the training dtype's."""

    @property
    def group(self) -> str:
        """The group's name in comm_bytes: x, y, z, data between replicas, all for a replica's grid."""
        if self.axis == ALL_AXIS:
            return "all"
        return DATA if self.axis == DATA_AXIS else AXES[self.axis]

    def operand_bytes(self, itemsize: int) -> int:
        return self.elements * (self.itemsize or itemsize)

    def wire_bytes(self, itemsize: int) -> float:
        """Bytes each rank sends in a ring implementation."""
        share = (self.group_size - 1) / self.group_size
        return (2 if self.kind == "all_reduce" else 1) * share * self.operand_bytes(itemsize)

    def summary(self, itemsize: int) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "phase": self.phase,
            "operand": self.operand,
            "kind": self.kind,
            "group": self.group,
            "group_size": self.group_size,
            "bytes": self.operand_bytes(itemsize),
            "wire_bytes": self.wire_bytes(itemsize),
        }


def _layer_collectives(
    shape: LayerShape, learnable_features: bool, wire: int | None, projected: bool = False
) -> list[Collective]:
    """Per layer l with roles (a, b, c) and the padded blocks of gtool.geometry.shapes (B_r = rows, B_b =
    inputs, C_in = in_cols, C_out = out_cols), in a group of more than one rank; aggregate-first, (A F) W:

        forward   all-gather  W part            a-group   G_a * ceil(C_in C_out / G_a)
                  all-gather  F_0 part (*)      a-group   G_a * ceil(B_b C_in / G_a)      layer 0 only
                  all-reduce  H = A F           b-group   B_r x C_in
                  all-reduce  Q = H W           c-group   B_r x C_out
        backward  all-reduce  dH = dQ W^T       b-group   B_r x C_in        (l > 0 or *)
                  reduce-sc.  dW = H^T dQ       a-group   as the all-gather of W
                  all-reduce  dF = A^T dH       a-group   B_b x C_in        (l > 0)
                  reduce-sc.  dF_0 (*)          a-group   as the all-gather of F_0

    transform-first, A (F W) (the weight replicated over the b-group):

        forward   all-gather  W part            b-group   G_b * ceil(C_in C_out / G_b)
                  all-gather  F_0 part (*)      a-group   as above
                  all-reduce  Z = F W           c-group   B_b x C_out
                  all-reduce  Y = A Z           b-group   B_r x C_out
        backward  all-reduce  dZ = A^T dY       c-group   B_b x C_out       (always: dW needs it)
                  all-reduce  dF = dZ W^T       a-group   B_b x C_in        (l > 0)
                  reduce-sc.  dW = F^T dZ       b-group   as the all-gather of W
                  reduce-sc.  dF_0 (*)          a-group   as the all-gather of F_0

    and after the last layer, whose output rows lie along its row axis and classes along its column axis:

        loss      all-reduce  row max, sum of exponentials, target logit   column-axis group, B_r each
                  all-reduce  loss              row-axis group, 1 element

    and around the layers, the parts of the ScaleGNN stack (gtool.geometry.shapes.StackParts); a dense
    layer playing (a, b, c) with `rows` rows (the projection: layer 0's B_b, on the features; the head:
    the last layer's B_r) and its C_in x C_out weight block split over b:

        forward   all-gather  projection/head W a dense layer's b-group   G_b * ceil(C_in C_out / G_b)
                  all-reduce  Y = X W           its c-group      rows x C_out           (cast)
                  all-gather  bias, scale       a GCN layer's row-axis group, a dense layer's b-group,
                                                                 G * ceil(C_out / G)
                  all-reduce  row squares       the layer's column-axis group, B_r      (RMSNorm)
                  all-to-all  residual          all (the grid)   the rank's output block's real rows x
                                                                 real columns
        backward  all-to-all  d residual        all              as forward on ranks at coordinate 0
                                                                 of the output's replica axis, else 0
                  all-reduce  d residual input  a-group          B_b x C_in
                  all-reduce  row squares       as forward
                  reduce-sc.  dbias, dscale, dW as their all-gathers
                  all-reduce  head dX           the head's a-group  B_r x C_in          (cast)

    With an output head the loss runs over the head's class axis (a) and row axis (b).

    (*) with --learnable-features (the projection's input when there is one). Layer 0's input is not
    differentiated otherwise (nor the projection's), so its dH and dF are never formed; with an input
    projection they are. Sizes are operand sizes: the reduced tensor, the gathered tensor, the scattered
    tensor, as gtool.trainer.comm.groups.CommBytes counts them; a ring moves 2 (g-1)/g of an all-reduce's
    operand per rank and (g-1)/g of an all-gather's or reduce-scatter's. With --comm-dtype bf16 the
    all-reduces of the SpMMs' and dense products' outputs and gradients (H, Q, dH, dF; Z, Y, dZ, dF) count 2
    bytes per element (they carry bfloat16), every other collective the training dtype's.
    """
    a, b, c = shape.roles
    ga, gb, gc = shape.sizes
    layer = shape.layer
    weight_axis = shape.geometry.weight_axis
    gw = shape.geometry.size(weight_axis)
    learned_input = layer == 0 and learnable_features and not projected
    differentiated = layer > 0 or projected
    weight = gw * shape.weight_part
    features = ga * -(-shape.inputs * shape.in_cols // ga)
    input_block = shape.inputs * shape.in_cols

    def make(phase: str, operand: str, kind: str, axis: int, size: int, elements: int) -> Collective:
        return Collective(layer, phase, operand, kind, axis, size, elements)

    def cast(phase: str, operand: str, axis: int, size: int, elements: int) -> Collective:
        return Collective(layer, phase, operand, "all_reduce", axis, size, elements, wire)

    items = [make("forward", "W", "all_gather", weight_axis, gw, weight)]
    if learned_input:
        items.append(make("forward", "F0", "all_gather", a, ga, features))
    if shape.transform_first:
        product = shape.inputs * shape.out_cols
        items += [
            cast("forward", "Z = F W", c, gc, product),
            cast("forward", "Y = A Z", b, gb, shape.rows * shape.out_cols),
            cast("backward", "dZ = A^T dY", c, gc, product),
        ]
        if differentiated:
            items.append(cast("backward", "dF = dZ W^T", a, ga, input_block))
        items.append(make("backward", "dW = F^T dZ", "reduce_scatter", weight_axis, gw, weight))
    else:
        hidden = shape.rows * shape.in_cols
        items += [
            cast("forward", "H = A F", b, gb, hidden),
            cast("forward", "Q = H W", c, gc, shape.rows * shape.out_cols),
        ]
        if differentiated or learned_input:
            items.append(cast("backward", "dH = dQ W^T", b, gb, hidden))
        items.append(make("backward", "dW = H^T dQ", "reduce_scatter", weight_axis, gw, weight))
        if differentiated:
            items.append(cast("backward", "dF = A^T dH", a, ga, input_block))
    if learned_input:
        items.append(make("backward", "dF0", "reduce_scatter", a, ga, features))
    return items


def _loss_collectives(last: LayerShape, parts: StackParts) -> list[Collective]:
    rows, columns = parts.output_axes(last)
    size = last.geometry.size
    layer = last.layer + (parts.head is not None)
    per_row = [
        Collective(layer, "loss", what, "all_reduce", columns, size(columns), last.rows)
        for what in ("row max", "sum exp", "target")
    ]
    return [*per_row, Collective(layer, "loss", "loss", "all_reduce", rows, size(rows), 1)]


def _vector(layer: int, operand: str, axis: int, size: int, cols: int) -> list[Collective]:
    """A bias's or norm scale's all-gather and its gradient's reduce-scatter over the group `axis`."""
    padded = size * -(-cols // size)
    return [
        Collective(layer, "forward", operand, "all_gather", axis, size, padded),
        Collective(layer, "backward", "d" + operand, "reduce_scatter", axis, size, padded),
    ]


def _linear_collectives(
    g: LinearGeometry, layer: int, name: str, rows: int, dims: tuple[int, int], wire: int | None, dx: bool
) -> list[Collective]:
    """A dense layer's (input projection, output head) weight gather and scatter, its output's all-reduce
    over the c-group and, when its input is differentiated (`dx`), dX's over the a-group."""
    a, b, c = g.roles
    ga, gb, gc = g.sizes
    in_cols, out_cols = g.in_cols(dims[0]).size, g.out_cols(dims[1]).size
    weight = gb * g.weight_part(*dims)
    items = [
        Collective(layer, "forward", f"{name} W", "all_gather", b, gb, weight),
        Collective(layer, "forward", f"{name} Y = X W", "all_reduce", c, gc, rows * out_cols, wire),
        Collective(layer, "backward", f"{name} dW", "reduce_scatter", b, gb, weight),
    ]
    if dx:
        items.append(Collective(layer, "backward", f"{name} dX", "all_reduce", a, ga, rows * in_cols, wire))
    return items


def _block_collectives(shape: LayerShape, parts: StackParts, layers: int, grid_size: int) -> list[Collective]:
    """A GCN layer's bias, and in a block its RMSNorm's row sums and its residual's reshard."""
    g, layer = shape.geometry, shape.layer
    rows_axis, cols_axis = g.row_axis, g.out_col_axis
    items = []
    if parts.bias:
        items += _vector(layer, "bias", rows_axis, g.size(rows_axis), shape.out_cols)
    if parts.norm and layer in parts.blocks(layers):
        items += _vector(layer, "scale", rows_axis, g.size(rows_axis), shape.out_cols)
        items += [
            Collective(layer, phase, "row squares", "all_reduce", cols_axis, g.size(cols_axis), shape.rows)
            for phase in ("forward", "backward")
        ]
    if parts.has_residual(shape, layers):
        moved = shape.real_rows * g.out_cols(shape.out_dim).real
        replica = roles_after(shape.roles, shape.transform_first)[0]
        sent_back = moved if g.coords[replica] == 0 else 0
        a = shape.roles[0]
        items += [
            Collective(layer, "forward", "residual", "all_to_all", ALL_AXIS, grid_size, moved),
            Collective(layer, "backward", "d residual", "all_to_all", ALL_AXIS, grid_size, sent_back),
            Collective(
                layer,
                "backward",
                "d residual input",
                "all_reduce",
                a,
                g.size(a),
                shape.inputs * shape.in_cols,
            ),
        ]
    return items


def _stack_collectives(
    shapes: list[LayerShape], learnable_features: bool, wire: int | None, parts: StackParts
) -> list[Collective]:
    """The collectives of the parts around the GCN layers (gtool.geometry.shapes.StackParts)."""
    layers, first, last = len(shapes), shapes[0], shapes[-1]
    grid_size = first.geometry.sizes[0] * first.geometry.sizes[1] * first.geometry.sizes[2]
    items = []
    p = parts.projection
    if p is not None:
        dims = (parts.num_features, parts.hidden)
        items += _linear_collectives(p, -1, "projection", first.inputs, dims, wire, False)
        if learnable_features:
            features = p.sizes[0] * -(-first.inputs * p.in_cols(parts.num_features).size // p.sizes[0])
            items += [
                Collective(-1, "forward", "F0", "all_gather", p.roles[0], p.sizes[0], features),
                Collective(-1, "backward", "dF0", "reduce_scatter", p.roles[0], p.sizes[0], features),
            ]
        if parts.bias:
            items += _vector(-1, "projection bias", p.roles[1], p.sizes[1], p.out_cols(parts.hidden).size)
    for shape in shapes:
        items += _block_collectives(shape, parts, layers, grid_size)
    h = parts.head
    if h is not None:
        dims = (parts.hidden, parts.num_classes)
        items += _linear_collectives(h, layers, "head", last.rows, dims, wire, True)
        if parts.bias:
            items += _vector(layers, "head bias", h.roles[1], h.sizes[1], h.out_cols(parts.num_classes).size)
    return items


def epoch_collectives(
    shapes: list[LayerShape],
    learnable_features: bool,
    wire_itemsize: int | None = None,
    parts: StackParts = GCN_PARTS,
) -> list[Collective]:
    """Every collective of one training step (forward, loss, backward) in groups of more than one rank;
    `wire_itemsize` (2 for bf16) the bytes per element of the all-reduces that carry a cast (see above);
    `parts` what the model has around its GCN layers (`_stack_collectives`)."""
    projected = parts.projection is not None
    items = [
        c for shape in shapes for c in _layer_collectives(shape, learnable_features, wire_itemsize, projected)
    ]
    items += _stack_collectives(shapes, learnable_features, wire_itemsize, parts)
    items += _loss_collectives(shapes[-1], parts)
    return [c for c in items if c.group_size > 1]


def bytes_by_group(collectives: Iterable[Collective], itemsize: int) -> dict[str, dict[str, int]]:
    """Operand bytes per group and kind: the figures `gtool train --log` records as comm_bytes."""
    totals = {group: dict.fromkeys(KINDS, 0) for group in GROUPS}
    for c in collectives:
        totals[c.group][c.kind] += c.operand_bytes(itemsize)
    return totals


def wire_bytes_by_group(collectives: Iterable[Collective], itemsize: int) -> dict[str, float]:
    """Ring wire bytes each rank sends per epoch in its x-, y- and z-group (and between replicas)."""
    totals = dict.fromkeys(AXES, 0.0)
    for c in collectives:
        totals[c.group] = totals.get(c.group, 0.0) + c.wire_bytes(itemsize)
    return totals
