"""Which rank a process is under torchrun, srun, or neither."""

from __future__ import annotations

from gtool.trainer.launch.environment import RankEnv, environment_rank


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
