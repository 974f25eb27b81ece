"""Which rank a process is under torchrun, srun, or neither."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gtool.trainer.launch.environment import RankEnv, environment_rank
from tests.support.stores import StoreFactory


def test_torchrun_environment() -> None:
    env = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "MASTER_ADDR": "node7", "MASTER_PORT": "1234"}
    assert environment_rank(env) == RankEnv(3, 8, 1, "node7", 1234, "torchrun")


def test_srun_environment() -> None:
    env = {"SLURM_PROCID": "5", "SLURM_STEP_NUM_TASKS": "6", "SLURM_LOCALID": "2", "MASTER_ADDR": "n1"}
    assert environment_rank(env) == RankEnv(5, 6, 2, "n1", 29500, "srun")


def test_plain_or_single_task_environment_launches_locally() -> None:
    assert environment_rank({}) is None
    assert environment_rank({"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "1"}) is None
    batch_script = {"SLURM_PROCID": "0", "SLURM_NTASKS": "8", "SLURM_JOB_NODELIST": "n[1-2]"}
    assert environment_rank(batch_script) is None


def test_srun_jobs_on_one_node_meet_at_ports_of_their_own() -> None:
    """MASTER_PORT defaulted to 29500 for every srun job: two jobs sharing a node collided."""
    step = {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2", "MASTER_ADDR": "n1"}
    first = environment_rank({**step, "SLURM_JOB_ID": "81234"})
    second = environment_rank({**step, "SLURM_JOB_ID": "81235"})
    assert first is not None and second is not None
    assert first.master_port != second.master_port
    assert 29500 <= first.master_port < 32768  # below the ports Linux hands out to connections
    assert environment_rank({**step, "SLURM_JOB_ID": "81234", "MASTER_PORT": "4000"}).master_port == 4000


@pytest.mark.integration  # runs the command line
def test_srun_without_master_addr_or_scontrol_is_one_error_line(stores: StoreFactory, tmp_path: Path) -> None:
    """It was a FileNotFoundError traceback."""
    env = {
        **os.environ,
        "PATH": str(tmp_path),  # no scontrol
        "SLURM_PROCID": "0",
        "SLURM_STEP_NUM_TASKS": "2",
        "SLURM_JOB_NODELIST": "node[01-02]",
    }
    run = subprocess.run(
        [sys.executable, "-m", "gtool.cli", "train", stores("rmat:8:8", tiles=2), "--grid", "2x1x1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: srun started this rank without MASTER_ADDR"), lines
    assert "'node[01-02]'" in lines[0] and "export MASTER_ADDR" in lines[0]


@pytest.mark.integration  # runs the command line
def test_the_log_flag_has_a_spelling_that_passes_through_torchrun() -> None:
    """torchrun's parser took `--log` for an abbreviation of its own --log-dir / --logs-specs."""
    from torch.distributed.run import get_args_parser

    gtool = ["-m", "gtool.cli", "train", "g.zarr", "--log-file", "run.jsonl"]
    parsed = get_args_parser().parse_args(["--nproc-per-node", "2", *gtool])
    assert parsed.training_script_args == ["train", "g.zarr", "--log-file", "run.jsonl"]
    help_text = subprocess.run(
        [sys.executable, "-m", "gtool.cli", "train", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
    ).stdout
    assert "--log-file" in help_text
