"""`gtool train`, the launcher's side: the run's paths resolved and its files prepared before any rank
starts, then the ranks started (`rank.run_rank` is what each does). It imports no torch: a local launch's
supervisor imports it, once, for every rank it forks."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

from gtool.architecture import refuse_missing_model
from gtool.store.reader import open_store
from gtool.store.writing.output_lock import output_lock
from gtool.store.writing.staging import absolute_location, check_output_file, make_folder, refuse_inside_store
from gtool.trainer.checkpoints.folder import (
    claim_folder,
    latest_manifest,
    refuse_other_shape,
    refuse_other_store,
    run_shape,
)
from gtool.trainer.config import TrainConfig
from gtool.trainer.fit.launching import RANK_MAIN
from gtool.trainer.launch.environment import environment_rank
from gtool.trainer.launch.local import LocalLaunch
from gtool.trainer.launch.start import start_ranks


def train(config: TrainConfig, started: LocalLaunch | None = None) -> None:
    """Run `config` on the ranks of torchrun/srun when started by one, else on local processes (a
    one-rank grid runs in this process: a second one would only add its memory), through `started`
    (from `started_ranks`) when given.

    Raises RankFailed (gtool.trainer.launch) naming the rank that failed first and its error.
    """
    config = with_absolute_paths(config)
    refuse_files_in_store(config)
    if not config.model.builtin:
        refuse_missing_model(config.model.model)
    env = environment_rank()
    writer = env is None or env.rank == 0
    checkpoint = config.runtime.checkpoint
    with output_lock(checkpoint, "gtool train") if writer and checkpoint else nullcontext():
        prepare_run_files(config, writer)
        start_ranks(config, "train", RANK_MAIN, config, started=started)


def with_absolute_paths(config: TrainConfig) -> TrainConfig:
    """`config` with its store, --checkpoint and --log resolved once, here, as absolute paths (URLs kept)."""
    runtime = config.runtime
    paths = {"checkpoint": runtime.checkpoint, "log": runtime.log}
    given = {name: absolute_location(path) for name, path in paths.items() if path}
    return config.replace(store=absolute_location(config.store), **given)


def refuse_files_in_store(config: TrainConfig) -> None:
    """A --checkpoint or --log that is the store or lies inside it is refused before anything is written:
    the run's files would change the store (files zarr does not know, or a removed epoch folder)."""
    for flag, path in (("--checkpoint", config.runtime.checkpoint), ("--log", config.runtime.log)):
        if path:
            refuse_inside_store(flag, path, config.store)


def prepare_run_files(config: TrainConfig, writer: bool = True) -> None:
    """The folders of --checkpoint and --log, made before any rank starts: a file in their way, a --log
    that is a folder or cannot be written (a read-only device), is an error naming it. The `writer` (the
    launching process, or rank 0 of torchrun's: it holds the checkpoint folder's lock) claims the folder:
    another run's checkpoint there is refused without --resume or --overwrite. With --resume, a latest
    checkpoint of another store's widths (features, classes), grid, batch size, replicas, dtype, ... is
    refused before a rank loads the store."""
    if config.runtime.checkpoint:
        make_folder(Path(config.runtime.checkpoint), "--checkpoint")
        if writer:
            claim_folder(Path(config.runtime.checkpoint), config.runtime.resume, config.runtime.overwrite)
        latest = latest_manifest(Path(config.runtime.checkpoint)) if config.runtime.resume else None
        if latest is not None:
            refuse_other_store(latest, config.store, open_store(config.store))
            refuse_other_shape(latest, run_shape(config))
    if config.runtime.log:
        check_output_file(Path(config.runtime.log), "--log", "the JSON lines")
