"""What each rank of `gtool train` runs, and the supervisor of its local ranks spawned first thing: this
module imports neither torch nor zarr, so that the command line spawns it before it checks the run."""

from __future__ import annotations

from gtool.trainer.config import TrainConfig
from gtool.trainer.launch.entry import Entry
from gtool.trainer.launch.local import LocalLaunch
from gtool.trainer.launch.start import local_ranks

RANK_MAIN = Entry("gtool.trainer.fit.rank", "run_rank")
"""What each rank of a run does."""


def started_ranks(config: TrainConfig) -> LocalLaunch | None:
    """The supervisor of `config`'s local ranks, spawned at once when this process will start them (see
    `local_ranks`): pass it to `train`."""
    return local_ranks(config, RANK_MAIN)
