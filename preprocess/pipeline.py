"""`gtool shard`: a source becomes a 2D-tiled store through a Dask map-reduce over edge chunks.

Stages: (scan: count nodes when the source declares none) -> (degrees, for --perm balanced: exact degrees
from one map + dedupe pass before permuting) -> map: read, orient, permute and bucket each edge chunk,
spilling sorted runs -> dedupe: sort runs and drop duplicates, counting the degrees of A + I -> write:
weight entries with D^-1/2 . D^-1/2 and write the tiles, while this process writes the node arrays;
features in permuted order fill the workers' idle moments. Nothing that grows with the number of edges is
held in memory outside one bounded chunk or run (docs/shard.md, "How it runs").
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future as ThreadFuture
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import fsspec
import numpy as np
import zarr
from rich.console import Console

from gtool.cores import available_cores
from gtool.errors import GtoolError, InputError
from gtool.interrupts import Interrupts
from gtool.preprocess import kernels, spill
from gtool.preprocess.budget import MIN_CHUNK_EDGES, TASKS_PER_WORKER, Budget, default_memory_limit
from gtool.preprocess.edges.mapper import (
    MapJob,
    MapOutputs,
    MapResult,
    MatrixMap,
    SelfLoops,
    dedupe_folder,
    map_chunk,
    scan_chunk,
)
from gtool.preprocess.edges.reducer import (
    DedupedBatch,
    DedupeResult,
    DedupeTask,
    TileWrite,
    batches,
    dedupe_batch,
    tile_row_degrees,
    write_tiles,
)
from gtool.preprocess.edges.tile_arrays import create_matrix_groups
from gtool.preprocess.engine.iostats import StageIO
from gtool.preprocess.engine.monitor import HighWater
from gtool.preprocess.engine.serial import SerialRunner
from gtool.preprocess.engine.shape import Engine, Runner, Task, default_workers, run_shape
from gtool.preprocess.engine.shared import (
    SHARED_FS,
    Place,
    bounded,
    check_shared,
    credentials_error,
    input_files,
    read_places,
    written_places,
)
from gtool.preprocess.engine.threaded import gathered, in_parts, scattered
from gtool.preprocess.nodes.feature_shuffle import assemble_bucket, plan_shuffle, route_block
from gtool.preprocess.nodes.node_writer import (
    create_features,
    feature_tasks,
    write_feature_rows,
    write_node_arrays,
    write_permutations,
)
from gtool.preprocess.options import ShardOptions
from gtool.preprocess.partitions import PartitionPlan
from gtool.preprocess.paths import resolved
from gtool.preprocess.permutation import DEGREE_SCHEMES, inverse, make_permutations
from gtool.preprocess.resolve import resolve_source
from gtool.preprocess.sources.base import EdgeChunk, FeatureSource, GraphSource, NodeData
from gtool.preprocess.sources.cache.entries import CacheFolder, cache_folder
from gtool.preprocess.sources.cache.extraction import prepare_source
from gtool.preprocess.sources.cache.record import Preparation
from gtool.preprocess.sources.nodes.classes import check_class_limit, class_count
from gtool.preprocess.sources.nodes.generated import (
    DEGREE_CLASSES,
    RandomFeatures,
    degree_classes,
    random_split,
)
from gtool.preprocess.spill import SharedReads, SpillDir, vanished
from gtool.preprocess.summary import ShardSummary
from gtool.store import layout
from gtool.store.metadata import (
    CLASS_INDEX,
    LabelsInfo,
    MatrixStats,
    PermutationInfo,
    StoreMeta,
    incomplete_marker,
)
from gtool.store.writing.output_lock import output_lock
from gtool.store.writing.staging import StagedOutput, is_url, local_path, published, storage_error, within
from gtool.version import __version__

T = TypeVar("T")

SMALL_RUN = 1 << 17
"""Edges and nodes up to which a run's stages (up to about 0.4 s) run in the `gtool` process itself: a
cluster's start and stop (about 0.3 s, and forking workers) would cost more than its workers save. On 2
cores the README's demo, sbm:20000:4 (100,000 edges), shards in 0.67 s so against 0.95 s on 2 workers;
this process alone stays faster up to about 500,000 edges there, less on more cores."""


def shard(
    source_spec: str, output: str, options: ShardOptions, console: Console | None = None
) -> ShardSummary:
    """Read `source_spec`, build the normalized, permuted, tiled matrices and write the store at `output`."""
    given = output
    source_spec, output, options = resolved(source_spec, output, options)
    check_outside_output(output, options)
    check_cluster_spill(output, options)
    try:
        with Interrupts() as interrupts, output_lock(output) as lock:
            if lock is not None:
                interrupts.on_abandon(lock.release)
            return shard_locked(source_spec, output, options, console, interrupts, given)
    except OSError as exc:
        error = storage_error(exc, output, run_places(output, options)) or vanished(exc, output)
        if error is not None:
            raise error from None
        raise
    except Exception as exc:
        if (error := credentials_error(exc, output)) is not None:
            raise error from None
        raise


def check_outside_output(output: str, options: ShardOptions) -> None:
    """Refuse a --spill-dir or cache folder that is the local output or inside it: publishing the store
    replaces that path (the run would fail taking the folder it made itself for another program's)."""
    if is_url(output):
        return
    cache = cache_dir(options)
    folders = [("--spill-dir", options.spill_dir)] + ([(cache.origin, str(cache.path))] if cache else [])
    for what, folder in folders:
        if folder and within(folder, output):
            raise GtoolError(
                f"{folder} ({what}): is the output store {output} or inside it, which publishing the store "
                "replaces: give a folder outside the output"
            )


def check_cluster_spill(output: str, options: ShardOptions) -> None:
    """Refuse an external cluster writing to a URL without --spill-dir: the spill folder would go beside
    this process (the folder it runs in), which the workers of other machines do not see."""
    if options.scheduler and is_url(output) and not options.spill_dir:
        raise GtoolError(
            f"-o {output} with --scheduler needs --spill-dir: a folder on {SHARED_FS} for the run's "
            "intermediate files, which the workers write and read"
        )


def spill_root(output: str, options: ShardOptions) -> tuple[str | None, str]:
    """Where the spill folder goes and what that place is: --spill-dir; beside a local output; for a URL
    output, this machine's temporary folder (an embedded cluster's workers share this machine)."""
    if options.spill_dir:
        return options.spill_dir, "given by --spill-dir"
    if is_url(output):
        return tempfile.gettempdir(), "this machine's temporary folder, for a URL output"
    return None, "the output's folder"


def run_places(output: str, options: ShardOptions) -> dict[str, str]:
    """The local folders a run writes to, by what they are: the output's, --spill-dir, the cache."""
    places: dict[str, str] = {}
    if not is_url(output):
        places["the output's folder"] = os.path.dirname(os.path.abspath(local_path(output)))
    if options.spill_dir and not is_url(options.spill_dir):
        places["--spill-dir"] = options.spill_dir
    cache = cache_dir(options)
    if cache is not None and cache.path.is_dir():
        places["the cache of extracted inputs"] = str(cache.path)
    return places


def shard_locked(
    source_spec: str,
    output: str,
    options: ShardOptions,
    console: Console | None,
    interrupts: Interrupts,
    given: str,
) -> ShardSummary:
    """`shard` once the output is this run's: a failure or an interrupt removes what it wrote. The summary
    names the output as `given`."""
    staged = StagedOutput(output, options.overwrite)
    interrupts.on_abandon(staged.discard)
    source = resolve_source(source_spec, options)
    limit = options.memory_limit or default_memory_limit()
    workers = options.workers or default_workers()
    declared = options.num_nodes or source.num_nodes() or 0
    budget = Budget(limit, declared, *run_shape(options.scheduler, workers), tiles=options.tiles)
    feature_file = open_feature_file(options.features, declared, budget) if options.features else None
    scratch = SpillDir(*spill_root(output, options), staged.near, staged.identity)
    interrupts.on_abandon(scratch.cleanup)
    prepared: Preparation | None = None
    try:
        with HighWater(scratch.path) as high_water:
            prepared = prepare_source(
                source, work_dir(options, scratch), console, options.progress, feature_file
            )
            starting = time.perf_counter()
            serial = small_run(source, options)
            with stage_engine(options, workers, limit, console, serial) as (engine, stages):
                cluster_seconds = time.perf_counter() - starting
                ready_workers(engine, options, console, source, feature_file)
                if engine.external:
                    places = shared_places(output, options, scratch, source, feature_file)
                    check_shared(engine.client, places, options.worker_timeout)
                measured = ShardRun(
                    source, options, staged.path, scratch, stages, engine, limit, feature_file
                ).execute()
                scratch.start_cleanup()
                with interrupts.completing(published(output)):
                    staged.publish()
                sizing = in_background(stored_bytes, staged.target)  # beside the cluster's stop
                stopping = time.perf_counter()
            cluster_seconds += time.perf_counter() - stopping
    except BaseException:
        try:
            staged.discard()
        except OSError as cleanup:
            logging.getLogger("gtool").warning("could not remove partial store %s: %s", staged.path, cleanup)
        raise
    finally:
        scratch.cleanup()
        if prepared is not None:
            prepared.close()
    assert prepared is not None  # made before any stage could succeed
    return ShardSummary(
        store=given,
        source=measured.source,
        num_nodes=measured.num_nodes,
        input_edges=measured.input_edges,
        nnz=measured.nnz,
        tiles=options.tiles,
        stats=measured.stats,
        seconds=measured.seconds + (prepared.seconds + cluster_seconds),
        bytes_written=sizing.result(),
        peak_rss_mb=high_water.peak_rss_mb,
        spill_peak_bytes=high_water.peak_spill,
        stage_seconds={"prepare": prepared.seconds, "cluster": cluster_seconds, **measured.stage_seconds},
        prepared=prepared,
        stage_io=measured.stage_io,
        concurrency=measured.concurrency,
    )


def small_run(source: GraphSource, options: ShardOptions) -> bool:
    """Whether this process runs the stages itself, without a cluster (engine/serial.py): a graph known to
    have at most SMALL_RUN edges and nodes, with no --features file, on no --scheduler, without --dashboard,
    and --workers not above 1. Such a graph's stages take less time than the cluster's start."""
    if options.scheduler or options.dashboard or options.features or (options.workers or 1) > 1:
        return False
    nodes, edges = options.num_nodes or source.num_nodes(), source.edge_count()
    return nodes is not None and edges is not None and max(nodes, edges) <= SMALL_RUN


@contextmanager
def stage_engine(
    options: ShardOptions, workers: int, limit: int, console: Console | None, serial: bool
) -> Iterator[tuple[Engine, Runner]]:
    """The engine and the runner of a run's stages: this process alone for a small run, else the Dask
    cluster (embedded with `workers` workers, or --scheduler's) and a StageRunner of its client."""
    if serial:
        with SerialRunner(console, options.progress) as stages:
            yield Engine(None, *run_shape(None, 1)), stages
        return
    from gtool.preprocess.engine.cluster import StageRunner, dask_engine  # distributed: 0.15 s to import

    with (
        dask_engine(options.scheduler, workers, limit, options.worker_timeout, options.dashboard) as engine,
        StageRunner(engine.client, console, options.progress) as stages,
    ):
        yield engine, stages


def ready_workers(
    engine: Engine,
    options: ShardOptions,
    console: Console | None,
    source: GraphSource,
    features: FeatureSource | None,
) -> None:
    """Have every worker of an external cluster import what the run's tasks need, the kernels too (a worker
    may run several tasks at once; gtool.preprocess.engine.preload), and link the Dask dashboard when one
    runs. The embedded cluster's workers are forked from this process, which has imported the modules."""
    if engine.external:
        from gtool.preprocess.engine.preload import preload, run_modules

        modules = run_modules(source, features)
        timeout = options.worker_timeout
        bounded(lambda: preload(engine.client, modules), timeout, engine.client, "loading gtool's modules")
    if console is None or not (options.dashboard or (engine.external and options.progress)):
        return
    link = engine.dashboard
    if link:
        console.print(f"Dask dashboard: {link}", highlight=False, soft_wrap=True)
    elif options.dashboard:
        console.print("notice: --dashboard: no Dask dashboard runs: it needs bokeh (pip install bokeh)")


def shared_places(
    output: str, options: ShardOptions, scratch: SpillDir, *inputs: GraphSource | FeatureSource | None
) -> list[Place]:
    """What the workers of an external cluster must see: the output's folder (or URL), the spill folder,
    the cache, and the input files they read (after preparation: the copies of compressed members)."""
    written = [
        ("-o", output) if is_url(output) else ("-o's folder", os.path.dirname(output)),
        ("the spill folder", str(scratch.path)),
    ]
    cache = cache_dir(options)
    if cache is not None:
        written.append((f"the cache, {cache.origin}", str(cache.path)))
    return written_places(written) + read_places(input_files(*inputs), "an input the workers read")


def work_dir(options: ShardOptions, scratch: SpillDir) -> CacheFolder:
    """Where copies of compressed inputs go: the cache, kept for later runs; without one, the spill
    folder (removed at the end)."""
    why = "--no-cache" if options.no_cache else "--scheduler without --cache-dir"
    return cache_dir(options) or CacheFolder(
        scratch.path / "prepare",
        f"in the spill folder: no cache with {why}",
        "pass --spill-dir with a folder you can write",
    )


def cache_dir(options: ShardOptions) -> CacheFolder | None:
    """The cache of compressed inputs' copies (--cache-dir, else $GTOOL_CACHE, else ROOT/gtool-cache); None
    with --no-cache, or with an external cluster and no --cache-dir."""
    if options.no_cache or (options.scheduler and not options.cache_dir):
        return None
    return cache_folder(options.cache_dir, options.root)


def open_feature_file(path: str, declared: int, budget: Budget) -> FeatureSource:
    """The --features file, checked before any work: at least one column, a row no wider than a task may
    hold, and, when the node count is declared, one row per node (else once the edges are counted)."""
    from gtool.preprocess.sources.nodes.files import load_features

    features = load_features(path)
    check_features(features, declared or None)
    budget.check_feature_width(features.num_features, features.where)
    return features


def check_features(features: FeatureSource, n: int | None) -> None:
    """Fail unless the features have a column, and one row per node when `n` is given."""
    if features.num_features < 1:
        raise InputError(features.where, "0 features per node: expected at least one feature column")
    if n is not None and features.num_rows != n:
        raise InputError(features.where, f"{features.num_rows} feature rows, expected one per node ({n})")


@dataclass(frozen=True)
class Measured:
    """What the stages of a run measured (the summary adds the preparation, the cluster and the totals)."""

    source: str
    num_nodes: int
    input_edges: int
    nnz: dict[int, int]
    stats: dict[int, MatrixStats]
    seconds: float
    stage_seconds: dict[str, float]
    stage_io: dict[str, StageIO]
    concurrency: int


class ShardRun:
    """One run of the pipeline: holds the O(N) arrays and drives the stages."""

    def __init__(
        self,
        source: GraphSource,
        options: ShardOptions,
        store: str,
        scratch: SpillDir,
        stages: Runner,
        engine: Engine,
        limit: int,
        feature_file: FeatureSource | None = None,
    ):
        self.source, self.options, self.store = source, options, store
        self.feature_file = feature_file
        """The --features file, checked and prepared (its compressed members extracted) before the run."""
        self.label_classes = 0
        """The class count of the source's or --labels' labels, checked against them by node_inputs."""
        self.permutations_digest: str | None = None
        """The digest of pr and pc, the store's node order (set when the permutations are written)."""
        self.scratch, self.stages, self.limit = scratch, stages, limit
        self.concurrency, self.processes = engine.concurrency, engine.processes
        self.threads = available_cores()
        """Threads of this process for its O(N) scatters and gathers through the permutations."""
        self.timings: dict[str, float] = {}
        self.feature_spills: list[str] = []
        self.started = time.perf_counter()

    @contextmanager
    def timed(self, name: str):
        start = time.perf_counter()
        yield
        self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - start

    def execute(self) -> Measured:
        opts = self.options
        zarr.open_group(store=self.store, mode="w").attrs[layout.META_KEY] = incomplete_marker()
        n = opts.num_nodes or self.source.num_nodes()
        chunks, chunk_edges = self.edge_chunks(n or 0)
        self.warm_kernels(chunks, chunk_edges)
        if n is None:
            n, chunks = self.scan(chunks)
        budget = self.budget(n)
        node_data = self.node_inputs(n)
        features = node_data.features or RandomFeatures(n, opts.num_features, opts.seed)
        budget.check_feature_width(features.num_features, features.where)
        plan = PartitionPlan(n, opts.tiles)
        loops = [SelfLoops(a, min(a + chunk_edges, n)) for a in range(0, n, chunk_edges)]
        inputs: list[EdgeChunk] = [*chunks, *loops]
        known = self.original_degrees(inputs, plan, budget) if opts.perm in DEGREE_SCHEMES else None
        with self.timed("permutations"):
            pr, pc = make_permutations(opts.perm, n, opts.seed, degrees=known, tiles=opts.tiles)
            two = not np.array_equal(pr, pc)
            ipr = self.scratch.save(inverse(pr, self.threads), "perm", "ipr.npy")
            ipc = ipr if not two else self.scratch.save(inverse(pc, self.threads), "perm", "ipc.npy")
        transposed = two and not opts.directed
        matrices = (MatrixMap(0, ipr, ipc),) + ((MatrixMap(1, ipc, ipr),) if two and not transposed else ())
        with self.timed("features"):  # the tasks themselves when this process runs them (a small run)
            feature_writes = self.start_features(features, pc, ipc, budget)
        job = MapJob(plan, matrices, opts.directed, str(self.scratch.path))
        maps = self.map_stage(inputs, job)
        input_edges = sum(m.edges for m in maps)
        if input_edges == 0:
            raise InputError(self.source.name, "empty graph: the source has no edges")
        runs, degrees = self.dedupe_stage(maps, job, budget, transposed)
        del maps
        with self.timed("write"):
            scales = self.scales(degrees, pr, pc)
            tile_nnz, tile_writes = self.start_write_stage(runs, plan, scales, budget, transposed)
        with self.timed("nodes"):
            num_classes, node_meta = self.write_node_data(node_data, pr, pc, degrees)
        del degrees
        with self.timed("write"):
            self.stages.finish(tile_writes)
        with self.timed("features"):
            self.stages.finish(feature_writes)
            self.scratch.release_later(self.feature_spills)
        stats = {m: MatrixStats.of(counts) for m, counts in tile_nnz.items()}
        self.write_metadata(n, plan, features, num_classes, stats, input_edges, node_meta)
        return Measured(
            source=self.source.name,
            num_nodes=n,
            input_edges=input_edges,
            nnz={m: int(c.sum()) for m, c in tile_nnz.items()},
            stats=stats,
            seconds=time.perf_counter() - self.started,
            stage_seconds=self.timings,
            stage_io=self.stages.stage_io(),
            concurrency=self.concurrency,
        )

    def warm_kernels(self, chunks: list[EdgeChunk], chunk_edges: int) -> None:
        """Have every worker load numba's kernels first, while this process prepares, when the run's entries
        (both directions of every edge) pay for numba's start. Its edges are the source's count, else those
        of its full chunks; a lone chunk of a source that does not say is left to its calls to decide
        (gtool.preprocess.kernels)."""
        edges = self.source.edge_count()
        if edges is None:
            edges = chunk_edges * len(chunks) if len(chunks) > 1 else 0
        if kernels.compiled_pays(2 * edges):
            self.stages.on_every_worker(kernels.warm)

    def budget(self, n: int) -> Budget:
        return Budget(self.limit, n, self.concurrency, self.processes, self.options.tiles)

    def edge_chunks(self, n: int) -> tuple[list[EdgeChunk], int]:
        """The source's chunks and their size in edges: what the budget allows, smaller where that keeps
        TASKS_PER_WORKER map tasks for every worker (at least MIN_CHUNK_EDGES; --chunk-edges overrides)."""
        if self.options.chunk_edges:
            return list(self.source.edge_chunks(self.options.chunk_edges)), self.options.chunk_edges
        size = self.budget(n).edges_per_chunk()
        chunks = list(self.source.edge_chunks(size))
        wanted = TASKS_PER_WORKER * self.concurrency
        smaller = max(MIN_CHUNK_EDGES, size * len(chunks) // wanted)
        if len(chunks) < wanted and smaller < size:
            size = smaller
            chunks = list(self.source.edge_chunks(size))
        return chunks, size

    def scan(self, chunks: list[EdgeChunk]) -> tuple[int, list[EdgeChunk]]:
        """Parse every chunk once to find the node count (max id + 1), keeping the parsed edges."""
        with self.timed("scan"):
            results = sorted(
                self.stages.run("scan edges", scan_chunk, list(enumerate(chunks)), str(self.scratch.path)),
                key=lambda r: r.index,
            )
        top = max((r.max_id for r in results), default=-1)
        if top < 0:
            raise InputError(self.source.name, "empty graph: the source has no edges")
        return top + 1, [r.chunk for r in results]

    def node_inputs(self, n: int) -> NodeData:
        """Node data from --labels/--split files (the --features file is opened before the run), else from
        the source; sizes checked against N, and the labels against their class count, before the edges
        are mapped."""
        opts = self.options
        if opts.num_classes is not None:
            check_class_limit(opts.num_classes, n, "--num-classes")
        data = self.source.node_data()
        if self.feature_file is not None:
            data.features = self.feature_file
        if opts.labels or opts.split:
            from gtool.preprocess.sources.nodes.files import load_labels, load_split

            if opts.labels:
                data.labels, data.num_classes = load_labels(opts.labels, n)
            if opts.split:
                data.split = load_split(opts.split, n)
        if data.labels is not None:
            data.labels = data.labels.astype(np.int64, copy=False)
            where = opts.labels or self.source.name
            self.label_classes = class_count(data.labels, data.num_classes, opts.num_classes, where)
        if data.features is not None:
            check_features(data.features, n)
        for name, array in ((opts.labels or "labels", data.labels), (opts.split or "split", data.split)):
            if array is not None and array.shape[0] != n:
                raise InputError(name, f"{array.shape[0]} rows, expected one per node ({n})")
        return data

    def write_node_data(
        self, data: NodeData, pr: np.ndarray, pc: np.ndarray, degrees: np.ndarray
    ) -> tuple[int, tuple[LabelsInfo, str]]:
        """Permutations, labels and splits into the store; returns the class count and the node metadata.

        Two threads of this process (numpy's shuffle and sorts and the chunks' compression release the
        GIL): one writes the permutations and draws the split while this one ranks the labels."""
        with ThreadPoolExecutor(2, thread_name_prefix="gtool-nodes") as pool:
            written = pool.submit(write_permutations, self.store, pr, pc)
            split = pool.submit(self.split, data, pr.shape[0])
            labels, num_classes = self.labels(data, scattered(degrees, pr, self.threads))
            write_node_arrays(self.store, labels, split.result(), pr, pc, self.threads)
            self.permutations_digest = written.result()
        return num_classes, self.node_metadata(data, labels)

    def split(self, data: NodeData, n: int) -> np.ndarray:
        """The source's split, else a seeded random 60/20/20 one."""
        return data.split if data.split is not None else random_split(n, self.options.seed)

    def node_metadata(self, data: NodeData, labels: np.ndarray) -> tuple[LabelsInfo, str]:
        """Where labels and split came from (a file, the source, or generated) and the labels' shape."""
        opts = self.options
        label_origin = opts.labels or (self.source.name if data.labels is not None else "degree-quantile")
        kind = CLASS_INDEX if labels.ndim == 1 else f"multi-label 0/1 int64[N, {labels.shape[1]}]"
        split_origin = opts.split or (self.source.name if data.split is not None else "random-60-20-20")
        return LabelsInfo(label_origin, kind, layout.LABEL_NONE), split_origin

    def labels(self, data: NodeData, node_degrees: np.ndarray) -> tuple[np.ndarray, int]:
        """Source labels and their class count (checked by node_inputs), or `--num-classes` classes by degree
        quantile."""
        if data.labels is None:
            classes = self.options.num_classes or DEGREE_CLASSES
            return degree_classes(node_degrees, classes, self.threads), classes
        return data.labels, self.label_classes

    def original_degrees(self, chunks: list[EdgeChunk], plan: PartitionPlan, budget: Budget) -> np.ndarray:
        """Exact degrees of A + I in original node order: map and dedupe with the identity permutation, in a
        folder of their own (the files of the later pass must not be confused with these, which are released
        in the background)."""
        identity = self.scratch.save(inverse(np.arange(plan.num_nodes)), "perm", "identity.npy")
        root = str(self.scratch.path / "degree-pass")
        job = MapJob(plan, (MatrixMap(0, identity, identity),), self.options.directed, root)
        runs, degrees = self.dedupe_stage(self.map_stage(chunks, job), job, budget, False)
        self.scratch.release_later(run.task.out for run in runs[0])
        return degrees

    def map_stage(self, chunks: list[EdgeChunk], job: MapJob) -> list[MapResult]:
        with self.timed("map"):
            results = list(self.stages.run("map edges", map_chunk, list(enumerate(chunks)), job))
        return sorted(results, key=lambda r: r.index)

    def dedupe_stage(
        self, maps: list[MapResult], job: MapJob, budget: Budget, transposed: bool
    ) -> tuple[dict[int, list[DedupeResult]], np.ndarray]:
        """Sort and dedupe runs of partitions; returns the runs per matrix and the degrees in pr order.

        With `transposed` (A1 will be written as A0 transposed) A0's runs also count their column slabs."""
        tasks, sizes, spilled = [], [], []
        plan, root, matrices = job.plan, job.spill_root, [m.matrix for m in job.matrices]
        cap = budget.group_entries(sum(int(c.sum()) for r in maps for c in r.counts.values()))
        for m in matrices:
            inputs, totals = MapOutputs.gathered(maps, m, root)
            spilled += [inputs.offsets, inputs.holders, *inputs.files]
            for i in range(plan.tiles):
                for j in range(plan.tiles):
                    for first, last in group_partitions(plan.tile_partitions(i, j), totals, cap):
                        out = f"{dedupe_folder(root, m)}/{i}_{j}_{first}.npy"
                        tasks.append(DedupeTask(i, j, first, last, inputs, out, m == 0, transposed))
                        sizes.append(int(totals[first:last].sum()))
        degrees = np.zeros(plan.num_nodes, dtype=np.int64)
        runs: dict[int, list[DedupeResult]] = {m: [] for m in matrices}
        with self.timed("dedupe"):
            grouped = batches(tasks, sizes, cap)
            deduped = self.stages.submit("sort + dedupe", dedupe_batch, grouped, plan)
            counted: dict[int, list[Task]] = {i: [] for i in range(plan.tiles)}
            for future, group in zip(deduped, grouped, strict=True):
                for i in sorted({t.i for t in group if t.count_rows}):
                    counted[i].append(future)
            rows = [(i, tuple(futures)) for i, futures in counted.items()]
            out = f"{root}/degrees"
            summed = self.stages.submit("count degrees", tile_row_degrees, rows, plan, out, priority=1)
            deduped_batches: Iterator[DedupedBatch] = self.stages.collect(deduped)
            for batch in deduped_batches:
                for result in batch.runs:
                    runs[result.task.matrix].append(result)
                spilled += [counts.path for counts in batch.row_counts.values()]
            row_degrees: Iterator[str] = self.stages.collect(summed)
            for path in row_degrees:
                i = int(Path(path).stem)
                slab = spill.load(path)
                degrees[i * plan.tile_size : i * plan.tile_size + slab.size] = slab
                spill.release(path)
        self.scratch.release_later(spilled)
        return runs, degrees

    def scales(self, degrees: np.ndarray, pr: np.ndarray, pc: np.ndarray) -> tuple[str, str] | None:
        """D^-1/2 in pr order and in pc order, spilled for the write tasks (None for --norm none)."""
        if self.options.norm == "none":
            return None
        scale_r = np.empty(degrees.shape[0], dtype=np.float32)

        def rows(start: int, stop: int) -> None:
            scale_r[start:stop] = 1.0 / np.sqrt(degrees[start:stop])

        in_parts(degrees.shape[0], self.threads, rows)
        scale_c = gathered(scattered(scale_r, pr, self.threads), pc, self.threads)
        return self.scratch.save(scale_r, "scale", "r.npy"), self.scratch.save(scale_c, "scale", "c.npy")

    def start_write_stage(
        self,
        runs: dict[int, list[DedupeResult]],
        plan: PartitionPlan,
        scales: tuple[str, str] | None,
        budget: Budget,
        transposed: bool,
    ) -> tuple[dict[int, np.ndarray], list[Task]]:
        """Start writing every tile of every matrix (A1 from A0's runs when `transposed`), so that this
        process writes the node arrays meanwhile; returns the T x T nonzero counts per matrix and the
        write tasks."""
        tasks, tile_nnz = [], {}
        total = sum(r.nnz for results in runs.values() for r in results) * (2 if transposed else 1)
        cap = budget.group_entries(total)
        by_tile = {m: tile_runs(results) for m, results in runs.items()}
        for m, tiles in by_tile.items():
            row_scale, col_scale = (scales if m == 0 else scales[::-1]) if scales else (None, None)
            tile_nnz[m] = np.zeros((plan.tiles, plan.tiles), dtype=np.int64)
            for (i, j), parts in sorted(tiles.items()):
                tile_nnz[m][i, j] = sum(p.nnz for p in parts)
                paths = tuple(p.task.out for p in parts)
                tasks.append(TileWrite(m, i, j, paths, int(tile_nnz[m][i, j]), row_scale, col_scale))
        if transposed:
            tile_nnz[1] = tile_nnz[0].T.copy()
            col_scale, row_scale = scales if scales else (None, None)
            for (j, i), parts in sorted(by_tile[0].items(), key=lambda item: item[0][::-1]):
                slab_counts = np.sum([p.slab_counts for p in parts], axis=0)
                rows = tuple(
                    (first * plan.slab_rows, min(last * plan.slab_rows, plan.tile_size))
                    for first, last in group_partitions(range(plan.slabs), slab_counts, cap)
                )
                paths = tuple(p.task.out for p in parts)
                tasks.append(TileWrite(1, i, j, paths, int(tile_nnz[1][i, j]), row_scale, col_scale, rows))
        work = [(self.store, b) for b in batches(tasks, [t.nnz for t in tasks], cap)]
        create_matrix_groups(self.store, sorted(tile_nnz))
        writes = self.stages.submit("write tiles", write_tiles, work, plan)
        self.release_runs_when_written(writes, [batch for _, batch in work])
        return tile_nnz, writes

    def release_runs_when_written(self, writes: list[Task], batches: list[list[TileWrite]]) -> None:
        """Free each deduplicated run as soon as every tile write that reads it is done (A0's runs are read
        twice when A1 is written as their transpose), while the other tiles are still being written."""
        reads = [[path for tile in batch for path in tile.runs] for batch in batches]
        shared = SharedReads(self.scratch, reads)
        self.stages.when_finished(writes, [functools.partial(shared.done, paths) for paths in reads])

    def start_features(self, features: FeatureSource, pc: np.ndarray, ipc: str, budget: Budget) -> list[Task]:
        """Start writing X'[i] = X[pc[i]] in the background: workers take these tasks whenever the edge
        stages leave them idle (while this process plans a stage or writes node arrays, and at the tail of
        every stage). Features read from a file are permuted by sequential passes (route, then assemble:
        gtool.preprocess.nodes.feature_shuffle); generated or in-memory ones are gathered chunk by chunk."""
        pc_path = self.scratch.save(pc, "perm", "pc.npy")
        n = pc.shape[0]
        metadata = create_features(self.store, n, features.num_features)
        if not features.on_disk:
            tasks = feature_tasks(self.store, pc_path, metadata, self.concurrency)
            return self.stages.submit("permute features", write_feature_rows, tasks, features, priority=-1)
        piece = budget.feature_piece_bytes(4 * n * features.num_features)
        shuffle = plan_shuffle(self.store, metadata, ipc, pc_path, str(self.scratch.path), piece)
        blocks = list(range(shuffle.blocks))
        self.feature_spills = [shuffle.block_file(b) for b in blocks]
        routed = self.stages.submit("route features", route_block, blocks, shuffle, features, priority=-1)
        buckets = list(range(shuffle.buckets))
        assembled = self.stages.submit(
            "assemble features", assemble_bucket, buckets, shuffle, routed, priority=-1
        )
        return routed + assembled

    def write_metadata(
        self,
        n: int,
        plan: PartitionPlan,
        features: FeatureSource,
        num_classes: int,
        stats: dict[int, MatrixStats],
        input_edges: int,
        node_meta: tuple[LabelsInfo, str],
    ) -> None:
        """The store's attributes, with complete: true, written last."""
        opts = self.options
        labels, split_origin = node_meta
        meta = StoreMeta(
            complete=False,
            num_nodes=n,
            num_features=features.num_features,
            num_classes=num_classes,
            nnz={m: int(s.tile_nnz.sum()) for m, s in stats.items()},
            tiles=opts.tiles,
            tile_size=plan.tile_size,
            normalization=opts.norm,
            graph="directed-in" if opts.directed else "symmetrized",
            permutation=PermutationInfo(opts.perm, opts.seed, self.permutations_digest),
            source={**self.source.describe(), "input_edges": input_edges},
            labels=labels,
            split_origin=split_origin,
            features_origin=features.where,
            created_by=f"gtool {__version__}",
            created_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            stats=stats,
            every_chunk=True,
        )
        group = zarr.open_group(store=self.store, mode="r+")
        group.attrs[layout.META_KEY] = meta.to_dict()
        group.attrs[layout.META_KEY] = replace(meta, complete=True).to_dict()


def group_partitions(partitions: range, totals: np.ndarray, cap: int) -> list[tuple[int, int]]:
    """Cut a tile's partitions into consecutive runs of at most `cap` entries (one partition at least)."""
    runs = batches(list(partitions), [int(totals[p]) for p in partitions], cap)
    return [(run[0], run[-1] + 1) for run in runs]


def tile_runs(results: list[DedupeResult]) -> dict[tuple[int, int], list[DedupeResult]]:
    """The deduplicated runs of each tile, in row order."""
    tiles: dict[tuple[int, int], list[DedupeResult]] = {}
    for r in results:
        tiles.setdefault((r.task.i, r.task.j), []).append(r)
    for parts in tiles.values():
        parts.sort(key=lambda r: r.task.first)
    return tiles


def in_background(fn: Callable[..., T], *args: Any) -> ThreadFuture[T]:
    """fn(*args) in a thread of its own, started now."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="gtool-background")
    try:
        return pool.submit(fn, *args)
    finally:
        pool.shutdown(wait=False)


def stored_bytes(location: str) -> int:
    """Bytes the store occupies."""
    if is_url(location):
        fs, path = fsspec.core.url_to_fs(location)
        return int(fs.du(path))
    total, folders = 0, [location]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
    return total
