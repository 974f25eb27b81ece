"""Every grid of a rank count, predicted and ranked: the core of `gtool plan`.

One pass over the store's tile statistics gives every rank's shard nonzeros on every grid
(gtool.geometry.bandnnz); per grid the collectives (gtool.geometry.collectives), peak memory
(gtool.plan.costmodel.memory), the placement of its axes over the nodes (gtool.plan.costmodel.placement)
and epoch time (gtool.plan.costmodel.cost) follow from the shapes. Grids are ranked by predicted epoch
time, those over the memory limit last; the best is the fastest one that fits.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from gtool.architecture import ModelConfig
from gtool.errors import GtoolError
from gtool.geometry.bandnnz import ShardNnzTable, grid_band_counts
from gtool.geometry.collectives import Collective, bytes_by_group, epoch_collectives, wire_bytes_by_group
from gtool.geometry.grid import ProcessGrid
from gtool.geometry.shapes import LayerShape, factorizations
from gtool.plan.costmodel.budget import Budget, RunMemory, largest_batch, run_memory
from gtool.plan.costmodel.cost import EpochTime, epoch_time
from gtool.plan.costmodel.memory import MemoryEstimate, epoch_timeline, parameter_elements
from gtool.plan.costmodel.minibatch import MiniBatchRun
from gtool.plan.costmodel.placement import Placement, price_placements
from gtool.plan.costmodel.profile import DeviceProfile
from gtool.store.cells import shard_table
from gtool.store.reader import Store
from gtool.store.scan import Progress
from gtool.units import human_bytes

MAX_RANKS = 16_384
"""The most ranks a plan is for."""
MAX_PRICED_RANKS = 4_000_000
"""The most ranks a plan prices, summed over its layouts (grids): time and memory grow with them."""
MAX_LAYOUTS = 2_000
"""The most layouts a plan prices (each costs a few ms whatever its size): with MAX_PRICED_RANKS, a plan
takes under 10 s and 600 MB on 2 cores, its JSON included."""


@dataclass(frozen=True)
class PlanRequest:
    """What to plan for: the rank count, the model, and the memory each rank may use (bytes)."""

    ranks: int
    model: ModelConfig = field(default_factory=ModelConfig)
    memory_per_rank: int | None = None
    exact_nnz: bool = False
    ranks_per_node: int | None = None
    """Ranks on one node (`--gpus-per-node`; None: all of them, as local processes): they compute side by
    side, and groups of ranks on several nodes communicate across nodes."""
    batch_size: int | None = None
    """Mini-batch samples of this many nodes (None: full-graph epochs); then D x grid layouts are planned."""
    replicas: int | None = None
    """Only layouts of this many replicas (`--data-parallel D` given with `--grid auto`); None: any D."""
    memory_limit: int | None = None
    """Memory of one node's ranks together (`--memory-limit`, bytes); None: no limit."""
    features_from: str = "auto"
    """Mini-batch runs: where the features come from (`--features-from`; auto: memory when it fits)."""
    evaluation: str | None = None
    """Mini-batch runs: `--eval` full or sampled (None: full with the features in memory, else sampled)."""

    def __post_init__(self) -> None:
        if self.ranks > MAX_RANKS:
            raise GtoolError(
                f"--ranks {self.ranks:,}: gtool plan prices grids of up to {MAX_RANKS:,} ranks (it prices "
                "every rank of every grid, so its time and memory grow with the ranks)"
            )
        self._refuse_large_plans()
        object.__setattr__(self, "model", self.model.for_mode(self.batch_size is not None))

    def _refuse_large_plans(self) -> None:
        """Refuse a rank count whose divisors make more layouts, or more ranks over them, than a plan
        prices (15,120 ranks: 1,350 grids of 15,120 ranks took 7 GB as JSON)."""
        sizes = [grid.size for _, grid in layouts(self)]
        if len(sizes) <= MAX_LAYOUTS and sum(sizes) <= MAX_PRICED_RANKS:
            return
        kind = "grids" if self.batch_size is None else "D x grid layouts"
        raise GtoolError(
            f"--ranks {self.ranks:,}: its {len(sizes):,} {kind} hold {sum(sizes):,} ranks to price; "
            f"gtool plan prices up to {MAX_LAYOUTS:,} layouts of up to {MAX_PRICED_RANKS:,} ranks in all "
            "(its time and memory grow with both); a rank count with fewer divisors has fewer grids"
        )

    @property
    def node_ranks(self) -> int:
        return min(self.ranks, self.ranks_per_node or self.ranks)

    def budget(self, replicas: int) -> Budget:
        """What a layout of `replicas` replicas must fit."""
        return Budget(
            self.memory_per_rank,
            self.memory_limit,
            replicas,
            self.node_ranks,
            self.features_from,
            self.evaluation,
        )


@dataclass(frozen=True)
class GridEstimate:
    """The predictions for one grid, laid over the nodes by its cheapest placement (placements[0])."""

    grid: ProcessGrid
    shapes: list[LayerShape]
    nnz: np.ndarray
    collectives: list[Collective]
    time: EpochTime
    memory: MemoryEstimate
    itemsize: int
    fits: bool
    placements: list[Placement]
    replicas: int = 1
    """Replicas of the grid (mini-batch runs: --data-parallel)."""
    run_memory: RunMemory | None = None
    """Its memory in each feature mode, the mode it would run in, and one node's total."""

    @property
    def node_axes(self) -> list[str]:
        """The axes of more than one rank whose groups stay inside a node."""
        return self.placements[0].node_axes(self.grid)

    @property
    def layout(self) -> str:
        """The grid, or D x (grid) with replicas."""
        return f"{self.replicas}x({self.grid})" if self.replicas > 1 else str(self.grid)

    @property
    def peak_memory(self) -> int:
        return int(self.memory.peak.max())

    @property
    def nnz_imbalance(self) -> float:
        """Largest over mean shard nonzeros, over ranks and layers."""
        mean = self.nnz.mean(axis=0)
        return float(np.max(np.where(mean > 0, self.nnz.max(axis=0) / np.where(mean > 0, mean, 1), 1.0)))

    def group_bytes(self) -> dict[str, dict[str, int]]:
        """Operand bytes per group and kind of one epoch on every rank (what --log records)."""
        return bytes_by_group(self.collectives, self.itemsize)

    def wire_bytes(self) -> dict[str, float]:
        """Ring wire bytes each rank sends per epoch, per grid axis."""
        return wire_bytes_by_group(self.collectives, self.itemsize)

    def summary(self) -> dict[str, Any]:
        worst = int(self.memory.peak.argmax())
        return {
            "grid": self.layout,
            "dims": list(self.grid.dims),
            "placement": self.grid.placement,
            "node_axes": self.node_axes,
            "placement_collective_seconds": {p.order: p.comm for p in self.placements},
            "replicas": self.replicas,
            "fits": self.fits,
            "epoch_seconds": self.time.total,
            "spmm_seconds": float(self.time.spmm.max(axis=0).sum()),
            "dense_seconds": float(self.time.dense.max(axis=0).sum()),
            "comm_seconds": self.time.comm,
            "overhead_seconds": self.time.overhead,
            "slowest_rank": self.time.slowest_rank,
            "rank_layer_nnz": self.nnz.tolist(),
            "nnz_max_over_mean": self.nnz_imbalance,
            "comm_bytes": self.group_bytes(),
            "wire_bytes": self.wire_bytes(),
            "collectives": [c.summary(self.itemsize) for c in self.collectives],
            "peak_memory_bytes": self.peak_memory,
            "rank_peak_memory_bytes": self.memory.peak.astype(int).tolist(),
            "memory_of_largest_rank": self.memory.parts(worst),
            **(self.run_memory.summary() if self.run_memory else {}),
        }


@dataclass(frozen=True)
class Plan:
    """Every grid ranked, the best one (None when none fits) and why."""

    request: PlanRequest
    widths: list[int]
    grids: list[GridEstimate]
    best: GridEstimate | None
    reason: str
    nnz_estimated: bool

    def summary(self) -> dict[str, Any]:
        """The plan's figures; "grids" is an iterator that summarizes a grid as it is drawn (in rank
        order), so that a writer holds one grid's figures at a time (cli.jsonstream)."""
        r = self.request
        return {
            "ranks": r.ranks,
            "ranks_per_node": r.node_ranks,
            "layers": r.model.layers,
            "hidden": r.model.hidden,
            "widths": self.widths,
            "layer_order": r.model.layer_order,
            "transform_first": list(r.model.orders(self.widths[0], self.widths[-1])),
            "itemsize": r.model.itemsize,
            "comm_dtype": r.model.comm_dtype,
            "dropout": r.model.dropout,
            "learnable_features": r.model.learnable_features,
            "memory_per_rank": r.memory_per_rank,
            "memory_limit": r.memory_limit,
            "nnz_from": "tile statistics, crossed tiles split by area"
            if self.nnz_estimated
            else "exact counts",
            "best": str(self.best.grid) if self.best else None,
            "best_placement": self.best.grid.placement if self.best else None,
            "reason": self.reason,
            "grids": (g.summary() for g in self.grids),
        }


def estimate_grid(
    grid: ProcessGrid,
    table: ShardNnzTable,
    widths: list[int],
    request: PlanRequest,
    profile: DeviceProfile,
    classes: int,
    replicas: int = 1,
    features: int | None = None,
) -> GridEstimate:
    """The predictions for one grid (`replicas` of it in a mini-batch run) of a store of `features`
    feature columns (None: widths[0], as without an input projection); its memory in the feature mode it
    would run in (gtool.plan.costmodel.budget)."""
    m = request.model
    features = widths[0] if features is None else features
    orders = m.orders(features, classes)
    shapes, parts = m.shapes(grid, table.num_nodes, features, classes)
    shards = table.rank_shards(grid, orders, m.start)
    nnz = shards.nnz
    collectives = epoch_collectives(shapes, m.learnable_features, m.wire_itemsize, parts)
    memory = run_memory(
        shapes, shards, m, classes, table.num_nodes, request.batch_size, request.budget(replicas), parts
    )
    placements = price_placements(grid, collectives, profile, m.itemsize, request.node_ranks)
    spanning = placements[0].spanning
    if request.batch_size is None:
        allocated = epoch_timeline(shapes, m, classes, parts).allocated
        parameters = parameter_elements(shapes, m, parts)
        time = epoch_time(
            shapes, nnz, collectives, profile, m, parameters, request.node_ranks, allocated, spanning, parts
        )
    else:
        run = MiniBatchRun(table.num_nodes, request.batch_size, replicas)
        replicas_span = request.node_ranks < request.ranks
        collectives, time = run.epoch(
            shapes, nnz, m, profile, request.node_ranks, classes, (*spanning, replicas_span), parts
        )
    placed = grid.with_placement(placements[0].order)
    return GridEstimate(
        placed,
        shapes,
        nnz,
        collectives,
        time,
        memory.memory,
        m.itemsize,
        memory.fits,
        placements,
        replicas,
        memory,
    )


def _placement_note(estimate: GridEstimate, ranks_per_node: int) -> str:
    """How the grid's axes lie over nodes of `ranks_per_node` ranks, and what the worst order would cost."""
    chosen, worst = estimate.placements[0], estimate.placements[-1]
    inside = ", ".join(estimate.node_axes) or "no axis"
    text = f"placement {chosen.order}: {inside} inside nodes of {ranks_per_node}"
    if worst.comm > chosen.comm:
        text += f" (collectives {chosen.comm:.3g} s, against {worst.comm:.3g} s placed {worst.order})"
    return text


def _limits(request: PlanRequest) -> str:
    """The limits a grid must fit, in words ('' when none)."""
    rank, node = request.memory_per_rank, request.memory_limit
    limits = [f"{human_bytes(rank)} per rank"] if rank else []
    limits += [f"--memory-limit {human_bytes(node)} per node"] if node else []
    return " and ".join(limits)


def _reason(ranked: list[GridEstimate], request: PlanRequest) -> str:
    fitting = [g for g in ranked if g.fits]
    over = len(ranked) - len(fitting)
    limits = _limits(request)
    if not fitting:  # every grid fits without a limit
        smallest = min(ranked, key=lambda g: g.peak_memory)
        node = f", {human_bytes(smallest.run_memory.node_peak)} per node" if smallest.run_memory else ""
        fewer = "a smaller --batch-size" if request.batch_size else "mini-batches (--batch-size)"
        return (
            f"no grid fits {limits}: the smallest peak is {human_bytes(smallest.peak_memory)} per rank{node} "
            f"({smallest.layout}); use more ranks, {fewer} or a narrower model"
        )
    best = fitting[0]
    t = best.time
    split = (
        f"SpMM {t.spmm.max(axis=0).sum():.3g} s, dense {t.dense.max(axis=0).sum():.3g} s, "
        f"comm {t.comm:.3g} s, overhead {t.overhead:.3g} s"
    )
    text = f"fastest predicted epoch, {t.total:.3g} s ({split}), of {len(fitting)} grid(s)"
    text += f" that fit {limits}" if limits else ""
    text += f" ({over} over the limit)" if over else ""
    if len(fitting) > 1:
        runner = fitting[1]
        slower = runner.time.total / t.total - 1
        text += f"; next {runner.layout} is {100 * slower:.1f}% slower"
        if runner.time.comm > t.comm:
            text += f" (comm {runner.time.comm:.3g} s)"
        elif runner.time.compute.max(axis=0).sum() > t.compute.max(axis=0).sum():
            text += f" (slowest rank's compute {runner.time.compute.max(axis=0).sum():.3g} s)"
    if request.node_ranks < request.ranks:
        text += "; " + _placement_note(best, request.node_ranks)
    return text


def layouts(request: PlanRequest) -> list[tuple[int, ProcessGrid]]:
    """(replicas, grid) of every layout of the ranks: the grids of P ranks, and for a mini-batch run
    D replicas of every grid of P / D ranks for every D dividing P (only `request.replicas` when set)."""
    if request.replicas is not None:
        replicas = [request.replicas]
    else:
        replicas = [1] if request.batch_size is None else list(range(1, request.ranks + 1))
    return [(d, g) for d in replicas if request.ranks % d == 0 for g in factorizations(request.ranks // d)]


def layout_memory(store: Store, request: PlanRequest, grid: ProcessGrid, replicas: int = 1) -> RunMemory:
    """The memory of `replicas` x `grid` on `store` under `request`'s limits, in the mode it would run in."""
    table = shard_table(store, grid_band_counts([grid]), request.exact_nnz)
    return _layout_memory(store, table, request, grid, replicas)


def largest_fitting_batch(
    store: Store, request: PlanRequest, grid: ProcessGrid, replicas: int = 1
) -> int | None:
    """The largest --batch-size whose run of `replicas` x `grid` fits `request`'s limits (either feature
    mode), by bisection on the mini-batch model; None when not even 2 nodes a step fit."""
    table = shard_table(store, grid_band_counts([grid]), request.exact_nnz)
    model = request.model

    def fits(batch: int) -> bool:
        sized = replace(request, batch_size=batch, replicas=replicas, model=model)
        return _layout_memory(store, table, sized, grid, replicas).fits

    return largest_batch(fits, store.num_nodes)


def _layout_memory(
    store: Store, table: ShardNnzTable, request: PlanRequest, grid: ProcessGrid, replicas: int
) -> RunMemory:
    m, features, classes = request.model, store.num_features, store.num_classes
    shapes, parts = m.shapes(grid, store.num_nodes, features, classes)
    shards = table.rank_shards(grid, m.orders(features, classes), m.start)
    budget = request.budget(replicas)
    return run_memory(shapes, shards, m, classes, store.num_nodes, request.batch_size, budget, parts)


def make_plan(
    store: Store, request: PlanRequest, profile: DeviceProfile, progress: Progress | None = None
) -> Plan:
    """Predict every layout of `request.ranks` on `store` and pick the best."""
    widths = request.model.widths(store.num_features, store.num_classes)
    candidates = layouts(request)
    if not candidates:
        raise GtoolError(f"--data-parallel {request.replicas} does not divide the {request.ranks} ranks")
    grids = [grid for _, grid in candidates]
    table = shard_table(store, grid_band_counts(grids), request.exact_nnz, progress)
    estimates = [
        estimate_grid(g, table, widths, request, profile, store.num_classes, d, store.num_features)
        for d, g in candidates
    ]
    ranked = sorted(estimates, key=lambda g: (not g.fits, g.time.total))
    best = ranked[0] if ranked[0].fits else None
    return Plan(request, widths, ranked, best, _reason(ranked, request), table.estimated)
