"""What `gtool train` checks before any rank starts."""

from __future__ import annotations

import re

import pytest

from gtool.errors import GtoolError
from gtool.trainer.checkpoints.files import Checkpoints
from gtool.trainer.config import TrainConfig
from gtool.trainer.fit import loop
from gtool.trainer.fit.train import prepare_run_files
from tests.trainer.cases import single_rank_comm


def test_checkpoint_and_log_paths_are_checked_before_ranks_start(tmp_path) -> None:
    file = tmp_path / "file"
    file.write_text("")
    for options, message in (
        ({"checkpoint": str(file)}, "file (--checkpoint): not a folder: a file is in the way"),
        ({"log": str(file / "log.jsonl")}, "file (the folder of --log): not a folder"),
        ({"log": str(tmp_path)}, "a folder; name a file for the JSON lines"),
    ):
        with pytest.raises(GtoolError, match=re.escape(message)):
            prepare_run_files(TrainConfig.of("s", **options))
    prepare_run_files(TrainConfig.of("s", checkpoint=str(tmp_path / "ck"), log=str(tmp_path / "a/log")))
    assert (tmp_path / "ck").is_dir() and (tmp_path / "a").is_dir()
    minibatch = TrainConfig.of("s", checkpoint=str(tmp_path / "ck"), batch_size=300, resume=True)
    shape = {**loop.run_shape(minibatch), "dims": [16, 4]}
    Checkpoints(str(tmp_path / "ck"), single_rank_comm(), shape).save(1, {}, {})
    prepare_run_files(minibatch)
    with pytest.raises(GtoolError, match="batch_size: checkpoint 300 vs run full graph"):
        prepare_run_files(minibatch.replace(batch_size=None))
    with pytest.raises(
        GtoolError, match=r"grid: checkpoint \[1, 1, 1\] vs run \[2, 1, 1\], .*data_parallel: "
    ):
        prepare_run_files(minibatch.replace(grid=(2, 1, 1), data_parallel=2))
