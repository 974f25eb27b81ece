"""The store's metadata (attributes["gtool"], docs/store-format.md): one typed, frozen record.

`gtool shard` builds a StoreMeta and writes `to_dict()`; every reader gets one from `StoreMeta.from_dict`,
which refuses a record with a missing or mistyped key by naming it. `to_dict` writes the keys in the
documented order, so stores stay byte-identical from one version to the next; keys this version does not
know (a newer writer's) are kept in `extra` and written back unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gtool.errors import StoreError
from gtool.store.choices import NORMALIZATIONS, PERMUTATION_SCHEMES
from gtool.store.layout import LABEL_NONE, LAYOUT_VERSION, SPLIT_CODES, SPLIT_NONE

GRAPH_KINDS = ("symmetrized", "directed-in")
DEGREE_SCHEMES = frozenset({"balanced"})
"""Schemes whose permutations depend on the degrees of A + I and on T, not only on N and the seed."""
CLASS_INDEX = "class index"
CLASSES_ANY_GRAPH = 100_000
"""Classes a store may have whatever its node count (class_limit)."""


def class_limit(num_nodes: int) -> int:
    """The most classes a store of `num_nodes` nodes may have: one per node, or CLASSES_ANY_GRAPH on a
    smaller graph. More leave classes that no node can have, and readers size output layers and logits
    by the count (a count edited to 10^12 would have `gtool train` allocate terabytes)."""
    return max(num_nodes, CLASSES_ANY_GRAPH)


def class_limit_problem(num_classes: int, num_nodes: int) -> str | None:
    """Why `num_classes` is too many for a graph of `num_nodes` nodes (its count, the limit and the
    reason), None when it is not."""
    limit = class_limit(num_nodes)
    if num_classes <= limit:
        return None
    return (
        f"{num_classes:,} classes, above the limit of {limit:,} for a graph of {num_nodes:,} nodes (the "
        f"larger of its node count and {CLASSES_ANY_GRAPH:,}: more would be classes no node can have, and "
        "the model's output layer is sized by the count)"
    )


DIGEST_SHOWN = 8
"""Hex digits of a permutations digest that messages show."""


def node_order_options(order: dict[str, Any]) -> str:
    """A node order (StoreMeta.node_order) as the `gtool shard` options that made it and, when recorded,
    its permutations' digest: '--perm balanced --seed 0 --tiles 2 (permutations digest 3f2a91c0)'."""
    option = {"scheme": "--perm", "seed": "--seed", "tiles": "--tiles"}
    made = " ".join(f"{option.get(key, key)} {value}" for key, value in order.items() if key != "digest")
    digest = order.get("digest")
    return f"{made} (permutations digest {str(digest)[:DIGEST_SHOWN]})" if digest is not None else made


def same_node_order(written: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether two node orders put every node at the same positions: their permutations' digests when
    both have one (what decides the positions); else, for an order recorded before digests were, the
    options that made them."""
    if "digest" in written and "digest" in current:
        return bool(written["digest"] == current["digest"])
    options = {key: value for key, value in current.items() if key != "digest"}
    return {key: value for key, value in written.items() if key != "digest"} == options


def spread(values: np.ndarray) -> dict[str, float]:
    """min / mean / max / max-over-mean of some counts (max/mean 0 when they are all 0)."""
    flat = np.asarray(values, dtype=np.float64).ravel()
    mean = float(flat.mean()) if flat.size else 0.0
    top = float(flat.max()) if flat.size else 0.0
    return {
        "min": int(flat.min()) if flat.size else 0,
        "mean": mean,
        "max": int(top),
        "max_over_mean": top / mean if mean else 0.0,
    }


def tile_stats(tile_nnz: np.ndarray) -> dict[str, Any]:
    """The spread of a T x T count array plus its coefficient of variation, empty tiles and the counts."""
    flat = tile_nnz.ravel().astype(np.float64)
    mean = float(flat.mean()) if flat.size else 0.0
    return {
        **spread(flat),
        "cv": float(flat.std() / mean) if mean else 0.0,
        "empty": int((flat == 0).sum()),
        "tile_nnz": tile_nnz.astype(int).tolist(),
    }


class Fields:
    """Typed reads of one JSON object of the metadata; errors name the store and the key."""

    def __init__(self, content: Any, where: str, path: str = ""):
        if not isinstance(content, dict):
            shown = f"'{path.rstrip('.')}'" if path else "record"
            raise StoreError(f"{where}: metadata {shown} is {content!r}, expected an object")
        self.content, self.where, self.path = content, where, path

    def raw(self, key: str) -> Any:
        if key not in self.content:
            raise StoreError(f"{self.where}: metadata has no '{self.path}{key}' (re-run gtool shard)")
        return self.content[key]

    def typed(self, key: str, kinds: type | tuple[type, ...], what: str) -> Any:
        value = self.raw(key)
        if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
            value = None  # JSON true/false are not numbers here
        if not isinstance(value, kinds):
            shown = self.raw(key)
            raise StoreError(f"{self.where}: metadata '{self.path}{key}' is {shown!r}, expected {what}")
        return value

    def integer(self, key: str, minimum: int | None = None) -> int:
        value = self.typed(key, int, "an integer")
        if minimum is not None and value < minimum:
            raise StoreError(f"{self.where}: metadata '{self.path}{key}' is {value}, expected >= {minimum}")
        return value

    def number(self, key: str) -> float:
        value = float(self.typed(key, (int, float), "a number"))
        if not math.isfinite(value):  # JSON has no NaN: `gtool info --json` would print invalid JSON
            raise StoreError(
                f"{self.where}: metadata '{self.path}{key}' is {value}, expected a finite number"
            )
        return value

    def text(self, key: str, choices: tuple[str, ...] | None = None) -> str:
        value = self.typed(key, str, "a string")
        if choices is not None and value not in choices:
            name = f"{self.path}{key}"
            raise StoreError(f"{self.where}: metadata '{name}' is {value!r}, expected one of {choices}")
        return value

    def flag(self, key: str) -> bool:
        return self.typed(key, bool, "true or false")

    def optional_flag(self, key: str) -> bool:
        """A flag that older stores lack (false when absent)."""
        return key in self.content and self.flag(key)

    def optional_digest(self, key: str) -> str | None:
        """A hex digest that older stores lack (None when absent)."""
        if key not in self.content:
            return None
        value = self.text(key)
        if not value or any(c not in "0123456789abcdef" for c in value):
            raise StoreError(f"{self.where}: metadata '{self.path}{key}' is {value!r}, expected a hex digest")
        return value

    def nested(self, key: str) -> Fields:
        return Fields(self.raw(key), self.where, f"{self.path}{key}.")


@dataclass(frozen=True)
class MatrixStats:
    """How one stored matrix spreads over its T x T tiles (`stats[m]`)."""

    min: int
    mean: float
    max: int
    max_over_mean: float
    cv: float
    empty: int
    tile_nnz: np.ndarray
    """int64 [T, T]: nonzeros of every tile."""

    @classmethod
    def of(cls, tile_nnz: np.ndarray) -> MatrixStats:
        """The statistics of a T x T count array."""
        return cls.from_dict(tile_stats(tile_nnz), "tile counts")

    @classmethod
    def from_dict(cls, content: Any, where: str, path: str = "") -> MatrixStats:
        fields = Fields(content, where, path)
        counts = fields.raw("tile_nnz")
        try:  # counts that are not all integers (1350.5) would be cut to integers
            given = np.asarray(counts)
            tile_nnz = given.astype(np.int64) if given.dtype.kind in "iu" else np.zeros(0, np.int64)
        except (TypeError, ValueError, OverflowError):
            tile_nnz = np.zeros(0, dtype=np.int64)
        if tile_nnz.ndim != 2 or tile_nnz.shape[0] != tile_nnz.shape[1] or (tile_nnz < 0).any():
            raise StoreError(f"{where}: metadata '{path}tile_nnz' is not a T x T array of counts")
        tile_nnz.setflags(write=False)  # the record is frozen: Store.tile_nnz hands this array out
        return cls(
            min=fields.integer("min"),
            mean=fields.number("mean"),
            max=fields.integer("max"),
            max_over_mean=fields.number("max_over_mean"),
            cv=fields.number("cv"),
            empty=fields.integer("empty"),
            tile_nnz=tile_nnz,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "min": self.min,
            "mean": self.mean,
            "max": self.max,
            "max_over_mean": self.max_over_mean,
            "cv": self.cv,
            "empty": self.empty,
            "tile_nnz": self.tile_nnz.astype(int).tolist(),
        }


@dataclass(frozen=True)
class PermutationInfo:
    """`permutation`: the scheme that made pr and pc, its seed, and the digest of pr and pc
    (gtool.store.values.permutations_digest; None in stores written before it was recorded)."""

    scheme: str
    seed: int
    digest: str | None = None

    def to_dict(self) -> dict[str, Any]:
        digest = {} if self.digest is None else {"digest": self.digest}
        return {"scheme": self.scheme, "seed": self.seed, **digest}


@dataclass(frozen=True)
class LabelsInfo:
    """`labels`: where the labels came from and their form (class index, or multi-label 0/1 columns)."""

    origin: str
    kind: str = CLASS_INDEX
    missing: int = LABEL_NONE

    @property
    def multi_label(self) -> bool:
        return self.kind != CLASS_INDEX


@dataclass(frozen=True)
class StoreMeta:
    """Everything `attributes["gtool"]` of a complete store says (docs/store-format.md, Metadata)."""

    num_nodes: int
    num_features: int
    num_classes: int
    nnz: dict[int, int]
    tiles: int
    tile_size: int
    normalization: str
    graph: str
    permutation: PermutationInfo
    source: dict[str, Any]
    labels: LabelsInfo
    split_origin: str
    features_origin: str
    created_by: str
    created_at: str
    stats: dict[int, MatrixStats]
    self_loops: bool = True
    complete: bool = True
    layout: int = LAYOUT_VERSION
    every_chunk: bool = False
    """`every_chunk_stored`: the writer stored every chunk, also those equal to the fill value, so a missing
    chunk file is damage. Stores written before lack the key: a missing chunk reads as the fill value."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Keys beyond those above (written by a newer gtool), kept as they were."""

    @property
    def node_order(self) -> dict[str, Any]:
        """The stored node orders pr and pc: the digest of the permutations (when recorded), which decides
        where each node's rows are, beside the options that made them (scheme, seed, and T for a scheme
        that follows the degrees and tiles), which name the order in messages. Two stores whose orders
        are `same_node_order` hold every node's rows at the same positions (what learned features, saved
        by position, need). Store.node_order computes the digest of a store written before it was
        recorded."""
        order: dict[str, Any] = {"scheme": self.permutation.scheme, "seed": self.permutation.seed}
        if self.permutation.scheme in DEGREE_SCHEMES:
            order["tiles"] = self.tiles
        if self.permutation.digest is not None:
            order["digest"] = self.permutation.digest
        return order

    @property
    def matrices(self) -> list[int]:
        """The stored matrices: [0] when pr == pc, else [0, 1]."""
        return sorted(self.stats)

    @property
    def symmetrized(self) -> bool:
        return self.graph == "symmetrized"

    @classmethod
    def from_dict(cls, content: Any, where: str) -> StoreMeta:
        """The metadata of a complete store, refusing missing or mistyped keys with a message naming them."""
        fields = Fields(content, where)
        tiles = fields.raw("tiles")
        if not (isinstance(tiles, list) and len(tiles) == 2 and tiles[0] == tiles[1]):
            raise StoreError(f"{where}: metadata 'tiles' is {tiles!r}, expected [T, T]")
        Fields({"tiles": tiles[0]}, where).integer("tiles", 1)
        nnz = fields.nested("nnz")
        stats = fields.nested("stats")
        matrices = sorted(stats.content)
        if matrices not in (["0"], ["0", "1"]):
            raise StoreError(f"{where}: metadata 'stats' describes matrices {matrices}, expected 0 (and 1)")
        permutation = fields.nested("permutation")
        labels = fields.nested("labels")
        known = set(KEY_ORDER)
        num_nodes, num_classes = fields.integer("num_nodes", 0), fields.integer("num_classes", 1)
        if problem := class_limit_problem(num_classes, num_nodes):
            raise StoreError(f"{where}: metadata 'num_classes' says {problem}; the metadata is damaged")
        return cls(
            layout=fields.integer("layout"),
            complete=fields.flag("complete"),
            num_nodes=num_nodes,
            num_features=fields.integer("num_features", 0),
            num_classes=num_classes,
            nnz={int(m): nnz.integer(m, 0) for m in matrices},
            tiles=int(tiles[0]),
            tile_size=fields.integer("tile_size", 1),
            normalization=fields.text("normalization", NORMALIZATIONS),
            self_loops=fields.flag("self_loops"),
            graph=fields.text("graph", GRAPH_KINDS),
            permutation=PermutationInfo(
                permutation.text("scheme", PERMUTATION_SCHEMES),
                permutation.integer("seed", 0),
                permutation.optional_digest("digest"),
            ),
            source=fields.nested("source").content,
            labels=LabelsInfo(labels.text("origin"), labels.text("kind"), labels.integer("missing")),
            split_origin=fields.nested("split").text("origin"),
            features_origin=fields.nested("features").text("origin"),
            created_by=fields.text("created_by"),
            created_at=fields.text("created_at"),
            stats={int(m): MatrixStats.from_dict(stats.raw(m), where, f"stats.{m}.") for m in matrices},
            every_chunk=fields.optional_flag(EVERY_CHUNK),
            extra={k: v for k, v in content.items() if k not in known},
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON record, keys in the documented order (then any extra ones)."""
        return {
            "layout": self.layout,
            "complete": self.complete,
            "num_nodes": self.num_nodes,
            "num_features": self.num_features,
            "num_classes": self.num_classes,
            "nnz": {str(m): n for m, n in self.nnz.items()},
            "tiles": [self.tiles, self.tiles],
            "tile_size": self.tile_size,
            "normalization": self.normalization,
            "self_loops": self.self_loops,
            "graph": self.graph,
            "permutation": self.permutation.to_dict(),
            "source": self.source,
            "labels": {
                "origin": self.labels.origin,
                "kind": self.labels.kind,
                "missing": self.labels.missing,
            },
            "split": {"origin": self.split_origin, "codes": SPLIT_CODES, "none": SPLIT_NONE},
            "features": {"origin": self.features_origin},
            "created_by": self.created_by,
            "created_at": self.created_at,
            "stats": {str(m): s.to_dict() for m, s in self.stats.items()},
            **({EVERY_CHUNK: True} if self.every_chunk else {}),
            **self.extra,
        }


KEY_ORDER = (
    "layout",
    "complete",
    "num_nodes",
    "num_features",
    "num_classes",
    "nnz",
    "tiles",
    "tile_size",
    "normalization",
    "self_loops",
    "graph",
    "permutation",
    "source",
    "labels",
    "split",
    "features",
    "created_by",
    "created_at",
    "stats",
    "every_chunk_stored",
)
"""The keys of layout 1, in the order they are written."""
EVERY_CHUNK = "every_chunk_stored"
"""The key of StoreMeta.every_chunk (absent in stores written before every chunk was stored)."""


def incomplete_marker() -> dict[str, Any]:
    """What a store says while it is being written: its layout, and that it is not complete."""
    return {"layout": LAYOUT_VERSION, "complete": False}
