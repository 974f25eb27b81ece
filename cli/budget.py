"""`gtool train --memory-limit`: a run's memory priced by gtool plan's model before any rank starts.

A full-graph run, or a mini-batch one that does not fit even with its features read from the store, is
refused naming the memory it needs and the largest --batch-size that fits; `--features-from auto` becomes
memory when the run fits with its feature blocks loaded, else store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gtool.errors import GtoolError
from gtool.units import counted, human_bytes

if TYPE_CHECKING:
    from gtool.plan import PlanRequest, RunMemory
    from gtool.store.reader import Store
    from gtool.trainer import TrainConfig

WHERE = {"memory": "with its feature blocks in memory", "store": "with its features read from the store"}


def budget_request(config: TrainConfig, ranks: int, batch_size: int | None) -> PlanRequest:
    """The plan request of `config` on `ranks` ranks under its --memory-limit (default: this machine's;
    none for CUDA ranks, whose data the GPU's memory holds)."""
    from gtool.memory import machine_memory
    from gtool.plan import PlanRequest

    topology, minibatch = config.topology, config.minibatch
    host = config.runtime.device_type != "cuda"
    return PlanRequest(
        ranks,
        config.model,
        ranks_per_node=topology.ranks_per_node(ranks),
        batch_size=batch_size,
        replicas=minibatch.data_parallel if batch_size is not None else None,
        memory_limit=(topology.memory_limit or machine_memory().total) if host else None,
        features_from=minibatch.features_from,
        evaluation=minibatch.evaluation,
    )


def within_budget(config: TrainConfig, store: Store) -> tuple[TrainConfig, str | None]:
    """`config` with --features-from resolved, and what to say of the choice (None: nothing); a run over
    its --memory-limit is refused (GtoolError). CUDA ranks hold their data in the GPU's memory, which the
    budget of the machine's does not cover: their features stay in memory unless told otherwise."""
    from gtool.plan import layout_memory

    batch, replicas = config.minibatch.batch_size, config.minibatch.data_parallel
    if config.runtime.device_type == "cuda":
        auto = config.minibatch.features_from == "auto"
        return (config.replace(features_from="memory") if auto else config), None
    request = budget_request(config, config.world_size, batch)
    run = layout_memory(store, request, config.process_grid, replicas)
    if not run.fits:
        raise GtoolError(_refusal(config, store, request, run))
    if config.minibatch.features_from != "auto":
        return config, None
    try:
        chosen = config.replace(features_from=run.mode)
    except ValueError as error:
        raise GtoolError(str(error)) from None
    if batch is None:
        return chosen, None
    limit = _limit(config, request)
    if run.mode == "memory":
        return chosen, f"features in memory ({human_bytes(run.node_peak)} a node, within {limit})"
    resident = human_bytes(run.node_peaks["memory"])
    return chosen, f"features read from the store per step (resident {resident} would exceed {limit})"


def _limit(config: TrainConfig, request: PlanRequest) -> str:
    """The budget in words: the flag's, or this machine's when the flag was not given."""
    size = human_bytes(request.memory_limit or 0)
    return (
        f"--memory-limit {size}"
        if config.topology.memory_limit
        else f"this machine's {size} (--memory-limit)"
    )


def _refusal(config: TrainConfig, store: Store, request: PlanRequest, run: RunMemory) -> str:
    """The one line that refuses a run over its limit: what it needs, the limit, the batch that fits."""
    from gtool.plan import largest_fitting_batch

    batch = config.minibatch.batch_size
    ranks = counted(request.node_ranks, "rank")
    what = "a full-graph epoch" if batch is None else f"--batch-size {batch:,}"
    where = f" {WHERE[run.mode]}" if batch is not None else ""
    text = (
        f"{what} on grid {'x'.join(map(str, config.grid))} needs about {human_bytes(run.node_peak, up=True)} "
        f"on a node (its {ranks}){where}, more than {_limit(config, request)}"
    )
    sized = budget_request(config, config.world_size, batch or store.num_nodes)
    largest = largest_fitting_batch(store, sized, config.process_grid, config.minibatch.data_parallel)
    if largest is None:
        return f"{text}: not even --batch-size 2 fits; use more nodes, or a narrower model"
    return f"{text}: --batch-size {largest:,} or smaller fits"
