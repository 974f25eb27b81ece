"""Each layer's place on the 3D process grid: the shard and blocks a rank holds (docs/3d-gcn.md#the-grid).

Each layer gives the axes roles (a, b, c), layer 0 (x, y, z). An aggregate-first layer, (A F) W, holds
A_{l mod 2}[band a, band b] and W_l[band c, band b] and outputs F_{l+1}[band a, feature band b]; a
transform-first layer, A (F W), holds A_{l mod 2}[band c, band b] and W_l[band c, band a] and outputs
F_{l+1}[band c, feature band a]. Either output block is the next layer's input block (roles (c, a, b)
and (b, c, a) respectively), so no data moves between layers.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gtool.geometry.bands import Band, band, band_size
from gtool.geometry.grid import ProcessGrid
from gtool.geometry.tiles import TileCut, tiles_for_bands

ShardKey = tuple[int, Band, Band]
"""(matrix, row band, col band): equal keys are the same adjacency shard (one rectangle of one matrix)."""


Roles = tuple[int, int, int]
LayerOrders = tuple[bool, ...]
"""Per layer, whether it multiplies by its weight first (A (F W), transform-first) or last ((A F) W)."""
AGGREGATE_FIRST, TRANSFORM_FIRST = "aggregate-first", "transform-first"


def layer_orders(layers: int | Sequence[bool]) -> LayerOrders:
    """Each layer's order: `layers` as a tuple, or that many aggregate-first layers when a count (an int,
    numpy's too); a string or a float is a TypeError (a string read as one order per character)."""
    given: Any = layers  # checked here, whatever a caller passes
    try:
        if isinstance(given, (str, bytes)):
            raise TypeError
        try:
            orders = (False,) * operator.index(given)
        except TypeError:
            orders = tuple(bool(t) for t in given)
    except TypeError:
        raise TypeError(
            "layers must be a number of layers or a sequence of orders (True: transform-first), "
            f"got {layers!r}"
        ) from None
    if not orders:
        raise ValueError(f"the number of layers must be >= 1, got {layers}")
    return orders


def row_axis(roles: Roles, transform_first: bool) -> int:
    """The axis whose band a layer's adjacency rows and output rows are: a, or c transform-first."""
    return roles[2] if transform_first else roles[0]


def narrowing_layers(widths: Sequence[int]) -> LayerOrders:
    """Transform-first exactly in the layers whose output is narrower than their input (D_l+1 < D_l)."""
    return tuple(after < before for before, after in zip(widths[:-1], widths[1:], strict=False))


XYZ: Roles = (0, 1, 2)
"""The roles of the first operation of a model: the stored feature block is F[band y, feature band z]."""


def roles_after(roles: Roles, transform_first: bool) -> Roles:
    """The roles of the layer after a GCN layer playing `roles`: (c, a, b) after an aggregate-first one,
    (b, c, a) after a transform-first one (its input is the previous output block)."""
    a, b, c = roles
    return (b, c, a) if transform_first else (c, a, b)


def roles_after_linear(roles: Roles) -> Roles:
    """The roles after a dense layer (input projection, output head) playing (a, b, c): (c, b, a)."""
    a, b, c = roles
    return (c, b, a)


def layer_roles(orders: Sequence[bool], start: Roles = XYZ) -> list[Roles]:
    """Axis indices (a, b, c) of every GCN layer: `start` in layer 0 ((x, y, z), or the roles after an
    input projection), then each layer's `roles_after` the previous."""
    roles, every = start, []
    for transform_first in orders:
        every.append(roles)
        roles = roles_after(roles, transform_first)
    return every


def order_of_layer_output(layer: int) -> str:
    """'r' or 'c': the node order of layer `layer`'s output rows (layer 0 -> pr order)."""
    return "r" if layer % 2 == 0 else "c"


def logits_order(num_layers: int) -> str:
    """The node order of the final logits: pr when L is odd, pc when L is even."""
    return order_of_layer_output(num_layers - 1)


def layer_matrix(layer: int) -> int:
    """Which stored matrix a layer multiplies by: A0 for even layers, A1 for odd (A0 only if pr == pc)."""
    return layer % 2


def padded_slice(part: Band) -> slice:
    """The band's range in padded coordinates (a band past the real indices still has its place)."""
    return slice(part.index * part.size, (part.index + 1) * part.size)


@dataclass(frozen=True)
class LayerGeometry:
    """Layer `layer` as one rank of a grid holds it: the one definition every room uses.

    The axes play roles (a, b, c) in groups of `sizes` = (G_a, G_b, G_c) ranks; the rank sits at `coords`.
    Its input block is F_l[inputs (band b), in_cols(D_l) (band c)] in either order. Aggregate-first, it
    multiplies its adjacency shard A_matrix[rows (band a), inputs] by it and then by its weight block
    W_l[in_cols, out_cols(D_l+1) (band b)]; transform-first, by its weight block W_l[in_cols, out_cols (band
    a)] and then its adjacency shard A_matrix[rows (band c), inputs]. Either way its output block is
    F_l+1[rows, out_cols]. Node bands are fields; feature bands depend on the layer's widths. Bands are
    padded to equal sizes, so every rank of a grid holds blocks of the same shapes.
    """

    layer: int
    roles: Roles
    sizes: tuple[int, int, int]
    coords: tuple[int, int, int]
    matrix: int
    rows: Band
    inputs: Band
    transform_first: bool = False

    @property
    def order(self) -> str:
        return TRANSFORM_FIRST if self.transform_first else AGGREGATE_FIRST

    @property
    def row_axis(self) -> int:
        """The axis whose band the adjacency rows and the output rows are: a, or c transform-first."""
        return row_axis(self.roles, self.transform_first)

    @property
    def out_col_axis(self) -> int:
        """The axis whose band of D_l+1 the output and weight columns are: b, or a transform-first."""
        return self.roles[0] if self.transform_first else self.roles[1]

    @property
    def weight_axis(self) -> int:
        """The axis whose group replicates the weight block (and splits its parts): a, or b
        transform-first. The output block is replicated over the remaining axis, `replica_axis`."""
        return self.roles[1] if self.transform_first else self.roles[0]

    @property
    def replica_axis(self) -> int:
        """The axis whose group holds copies of the output block: c, or b transform-first."""
        return self.roles[1] if self.transform_first else self.roles[2]

    def size(self, axis: int) -> int:
        """The number of ranks along grid axis `axis`."""
        return self.sizes[self.roles.index(axis)]

    @property
    def key(self) -> ShardKey:
        """(matrix, row band, col band): equal keys are the same adjacency shard.

        Bands, not band indices: band 0 of Gx and band 0 of Gy are different rectangles when Gx != Gy.
        """
        return (self.matrix, self.rows, self.inputs)

    def tiles(self, num_nodes: int, tiles: int) -> list[TileCut]:
        """The stored tiles the adjacency shard overlaps, with the cuts that trim them to the shard."""
        return tiles_for_bands(self.rows, self.inputs, num_nodes, tiles)

    def in_cols(self, in_dim: int) -> Band:
        """Band c of the layer's input width D_l: the columns of its input block and rows of its weight."""
        return band(self.coords[self.roles[2]], self.sizes[2], in_dim)

    def out_cols(self, out_dim: int) -> Band:
        """The layer's band of its output width D_l+1: the columns of its output and of its weight block."""
        axis = self.out_col_axis
        return band(self.coords[axis], self.size(axis), out_dim)

    def input_block(self, in_dim: int) -> tuple[int, int, int, int]:
        """(first row, rows, first column, columns) of the input block in padded global coordinates."""
        rows, cols = padded_slice(self.inputs), padded_slice(self.in_cols(in_dim))
        return rows.start, self.inputs.size, cols.start, cols.stop - cols.start

    def weight_part(self, in_dim: int, out_dim: int) -> int:
        """Elements of this rank's flat part of the weight block (split evenly over its replicas' group)."""
        return band_size(self.in_cols(in_dim).size * self.out_cols(out_dim).size, self.size(self.weight_axis))


def rank_layers(
    grid: ProcessGrid,
    rank: int,
    layers: int | Sequence[bool],
    num_nodes: int,
    two_matrices: bool,
    start: Roles = XYZ,
) -> tuple[LayerGeometry, ...]:
    """Every layer as rank `rank` holds it: `layers` the layers' orders (True: transform-first) or their
    number (each aggregate-first); layer 0 plays `start`."""
    orders = layer_orders(layers)
    coords = grid.coords(rank)
    dims = grid.dims
    geometry = []
    every = layer_roles(orders, start)
    for layer, (roles, transform_first) in enumerate(zip(every, orders, strict=True)):
        a, b, c = roles
        rows = row_axis(roles, transform_first)
        geometry.append(
            LayerGeometry(
                layer=layer,
                roles=roles,
                sizes=(dims[a], dims[b], dims[c]),
                coords=coords,
                matrix=layer_matrix(layer) if two_matrices else 0,
                rows=band(coords[rows], dims[rows], num_nodes),
                inputs=band(coords[b], dims[b], num_nodes),
                transform_first=transform_first,
            )
        )
    return tuple(geometry)


def distinct_shards(layers: Iterable[LayerGeometry]) -> dict[ShardKey, LayerGeometry]:
    """The distinct adjacency shards among `layers` (first layer using each), in layer order."""
    distinct: dict[ShardKey, LayerGeometry] = {}
    for layer in layers:
        distinct.setdefault(layer.key, layer)
    return distinct


@dataclass(frozen=True)
class RankGeometry:
    """Everything a rank holds, as index ranges: the loader reads it, `gtool stats --grid` sizes it.

    Its input features are layer 0's input block F0[inputs, in_cols(F)]; its labels and splits are the
    rows of its logits, the last layer's row band, in the last layer's output order."""

    grid: ProcessGrid
    rank: int
    layers: tuple[LayerGeometry, ...]
    num_features: int

    @property
    def shards(self) -> dict[ShardKey, LayerGeometry]:
        """The distinct adjacency shards of the rank."""
        return distinct_shards(self.layers)

    @property
    def feature_rows(self) -> Band:
        return self.layers[0].inputs

    @property
    def feature_cols(self) -> Band:
        """Feature band z: the stored block is the first operation's input, which plays (x, y, z)."""
        return band(self.grid.coords(self.rank)[2], self.grid.dims[2], self.num_features)

    @property
    def label_rows(self) -> Band:
        return self.layers[-1].rows

    @property
    def label_order(self) -> str:
        return logits_order(len(self.layers))

    def tiles(self, num_nodes: int, tiles: int) -> list[tuple[int, int, int]]:
        """Every stored tile (matrix, i, j) the rank reads, sorted."""
        return sorted({(s.matrix, c.i, c.j) for s in self.shards.values() for c in s.tiles(num_nodes, tiles)})


def rank_geometry(
    grid: ProcessGrid,
    rank: int,
    layers: int | Sequence[bool],
    num_nodes: int,
    num_features: int,
    two_matrices: bool,
    start: Roles = XYZ,
) -> RankGeometry:
    """The shards, feature block and label rows of rank `rank` of `grid` for a GCN of `layers` (the
    layers' orders, or their number: see `rank_layers`) whose first GCN layer plays `start`."""
    held = rank_layers(grid, rank, layers, num_nodes, two_matrices, start)
    return RankGeometry(grid, rank, held, num_features)


@dataclass(frozen=True)
class LinearGeometry:
    """A dense layer (input projection, output head) playing roles (a, b, c) as one rank holds it.

    Its input block is X[rows (band b), in_cols (band c)], its weight block W[in_cols, out_cols (band a)]:
    the product, summed over the c-group, is its output block Y[rows, out_cols], replicated over c; the
    next operation plays (c, b, a). The weight block is split over the b-group (dW sums over rows), dX
    sums over the a-group (W's column bands).
    """

    roles: Roles
    sizes: tuple[int, int, int]
    coords: tuple[int, int, int]
    rows: Band

    @property
    def weight_axis(self) -> int:
        return self.roles[1]

    def in_cols(self, in_dim: int) -> Band:
        return band(self.coords[self.roles[2]], self.sizes[2], in_dim)

    def out_cols(self, out_dim: int) -> Band:
        return band(self.coords[self.roles[0]], self.sizes[0], out_dim)

    def weight_part(self, in_dim: int, out_dim: int) -> int:
        """Elements of this rank's flat part of the weight block (split evenly over the b-group)."""
        return band_size(self.in_cols(in_dim).size * self.out_cols(out_dim).size, self.sizes[1])


def linear_geometry(grid: ProcessGrid, rank: int, roles: Roles, num_nodes: int) -> LinearGeometry:
    """A dense layer playing `roles` as rank `rank` of `grid` holds it."""
    coords, dims = grid.coords(rank), grid.dims
    sizes = (dims[roles[0]], dims[roles[1]], dims[roles[2]])
    return LinearGeometry(roles, sizes, coords, band(coords[roles[1]], dims[roles[1]], num_nodes))
