"""Every `gtool` command that works for long collects garbage again once its imports are done: the command
line holds collection from its start (gtool.collector), and each command, the ranks it starts, their
supervisor and the Dask workers it forks must end up collecting, with what start-up made frozen."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.stores import StoreFactory

pytestmark = pytest.mark.integration  # real commands in fresh interpreters

PROBE = """
import gc, importlib, os, sys

notes, target, stop, *command = sys.argv[1:]

def seen(*args, **kwargs):
    with open(notes, "a") as out:
        out.write(f"{os.getpid()} {gc.isenabled()} {gc.get_freeze_count() > 0}\\n")
    if stop == "stop":
        raise SystemExit(0)

module, name = target.rsplit(".", 1)
setattr(importlib.import_module(module), name, seen)
from gtool.cli.main import program
sys.argv = ["gtool", *command]
program()
"""
"""Runs `gtool` with the target replaced by `seen`, which notes whether the process collects then."""


def probed(tmp_path, target: str, args: list[str], stop: bool) -> list[str]:
    """The lines each call of the patched target wrote (pid, collecting, anything frozen) in a `gtool` run."""
    notes = tmp_path / "notes.txt"
    flag = "stop" if stop else "go"
    subprocess.run(
        [sys.executable, "-c", PROBE, str(notes), target, flag, *args], cwd=tmp_path, check=True, timeout=300
    )
    return notes.read_text().splitlines()


@pytest.mark.parametrize(
    ("command", "target"),
    [
        (["stats"], "gtool.stats.collect_stats"),
        (["verify"], "gtool.store.verify.verify_store"),
        (["train", "--epochs", "1"], "gtool.trainer.launch.joined.join_world"),
    ],
)
def test_a_command_reading_a_store_collects_once_it_works(
    stores: StoreFactory, tmp_path, command: list[str], target: str
) -> None:
    store = stores("sbm:200:2", tiles=2)
    lines = probed(tmp_path, target, [command[0], store, *command[1:]], stop=True)
    assert [line.split()[1:] for line in lines] == [["True", "True"]]


def test_gtool_shard_and_its_forked_workers_collect_once_they_work(tmp_path) -> None:
    """The command settles before it prepares the source; its workers fork from that settled state (seen
    where each loads numba's kernels: a run of two full chunks has every worker do so first)."""
    args = ["shard", "rmat:18:8", "-o", str(tmp_path / "g.zarr"), "--tiles", "2x2", "--workers", "2", "-q"]
    lines = probed(tmp_path, "gtool.preprocess.kernels.shuffle.warm", args, stop=False)
    assert len({line.split()[0] for line in lines}) == 2  # one per worker process
    assert {tuple(line.split()[1:]) for line in lines} == {("True", "True")}
