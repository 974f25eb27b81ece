"""`gtool train` and `gtool predict` on two torchrun "nodes" of two ranks each, started from different working
folders on this machine: node-local or relative locations are refused before any work, shared ones train
and predict as one machine does."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import zarr

from gtool.trainer.launch.environment import free_port
from tests.support.paths import REPO
from tests.support.stores import StoreFactory

pytestmark = pytest.mark.integration  # torchrun launches

MODEL = ["--grid", "2x2x1", "--layers", "2", "--hidden", "8", "--dropout", "0.5", "--epochs", "2"]


@pytest.fixture(scope="module")
def store(stores: StoreFactory) -> str:
    return stores("rmat:9:8", tiles=4, num_features=32, num_classes=6)


def two_nodes(
    args: list[str], cwds: list[Path], wraps: tuple[list[str], list[str]] = ([], [])
) -> list[subprocess.CompletedProcess]:
    """`gtool ARGS` under two torchrun launches ("nodes" 0 and 1, two ranks each, rendezvous on loopback),
    node i started in folder cwds[i] (behind the command `wraps[i]`, if any)."""
    port = str(free_port())
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    launches = []
    for node, cwd in enumerate(cwds):
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(node)]
        torchrun += ["--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", port]
        command = [*wraps[node], *torchrun, "-m", "gtool.cli", *args]
        launches.append(
            subprocess.Popen(
                command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    results = []
    for launch in launches:
        stdout, stderr = launch.communicate(timeout=300)
        results.append(subprocess.CompletedProcess(launch.args, launch.returncode, stdout, stderr))
    return results


def gtool_errors(stderr: str) -> set[str]:
    """The distinct errors gtool's ranks printed (each rank of a node prints its own)."""
    return {
        re.sub(r"^error: rank \d+ failed: GtoolError: ", "", line)
        for line in stderr.splitlines()
        if line.startswith("error: ")
    }


def losses(stdout: str) -> list[str]:
    return re.findall(r"^epoch +\d+ +loss (\S+)", stdout, flags=re.MULTILINE)


@pytest.fixture()
def nodes(tmp_path: Path) -> list[Path]:
    folders = [tmp_path / "node0", tmp_path / "node1"]
    for folder in folders:
        folder.mkdir()
    return folders


def files_under(*folders: Path) -> list[str]:
    return sorted(str(p) for folder in folders for p in folder.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def local(store: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """The run on one machine: its output and its checkpoint folder (which the tests only read)."""
    checkpoint = tmp_path_factory.mktemp("local") / "ck"
    run = subprocess.run(
        [sys.executable, "-m", "gtool.cli", "train", store, *MODEL, "--checkpoint", str(checkpoint)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout, checkpoint


def test_a_relative_checkpoint_folder_is_refused_before_work(store: str, nodes: list[Path]) -> None:
    """Both launches exited 0 with the checkpoint split over the nodes' folders; on --resume node 0
    resumed and node 1 restarted at epoch 1 with fresh weights."""
    trained = two_nodes(["train", store, *MODEL, "--checkpoint", "ck"], nodes)
    host = os.uname().nodename
    for node, run in enumerate(trained):
        assert run.returncode != 0 and "epoch " not in run.stdout, run.stdout
        assert gtool_errors(run.stderr) == {
            f"--checkpoint {nodes[0] / 'ck'}: ranks 2, 3 (on host {host}) cannot see it (they look in "
            f"{nodes[1] / 'ck'}), so the ranks would not share what they write there; nothing was "
            "written. Give a folder on a file system that every node mounts at the same path (as an "
            "absolute path), or run the ranks on one node."
        }, (node, run.stderr)
    assert files_under(*nodes) == []  # the folders made, and no checkpoint, no token


def test_a_node_local_output_folder_is_refused_before_publishing(
    store: str, local: tuple[str, Path], tmp_path: Path, nodes: list[Path]
) -> None:
    """An absolute -o whose folder is node-local on node 1 (a private folder mounted at its path, in node
    1's own mount namespace): both launches exited 0, the output published by rank 0 held no chunk of the
    rows node 1's ranks wrote (they read as zeros)."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"]).returncode != 0:
        pytest.skip("needs mount namespaces (unshare -m) to give node 1 its own folder")
    shared, private = tmp_path / "shared", tmp_path / "node1-private"
    shared.mkdir()
    private.mkdir()
    node1 = ["unshare", "-m", "sh", "-c", f'mount --bind {private} {shared} && exec "$@"', "sh"]
    args = [
        "predict",
        store,
        "--checkpoint",
        str(local[1]),
        "-o",
        str(shared / "out.zarr"),
        "--grid",
        "2x2x1",
    ]
    for run in two_nodes(args, nodes, ([], node1)):
        assert run.returncode != 0
        [error] = gtool_errors(run.stderr)
        assert error.startswith(f"-o {shared / '.out.zarr.partial'}: ranks 2, 3 (on host "), run.stderr
        assert "cannot see it, so" in error and "or an fsspec URL every node reaches" in error
    assert files_under(shared, private) == [] and list(shared.iterdir()) == []


def test_shared_absolute_folders_train_resume_and_predict_as_one_machine(
    store: str, local: tuple[str, Path], tmp_path: Path, nodes: list[Path]
) -> None:
    checkpoint, output = tmp_path / "ck", tmp_path / "out.zarr"
    trained = two_nodes(["train", store, *MODEL, "--checkpoint", str(checkpoint)], nodes)
    assert [run.returncode for run in trained] == [0, 0], trained[0].stderr + trained[1].stderr
    assert losses(trained[0].stdout) == losses(local[0]) and len(losses(local[0])) == 2
    epoch = checkpoint / json.loads((checkpoint / "latest.json").read_text())["path"]
    assert sorted(p.name for p in epoch.iterdir()) == [
        "manifest.json",
        *(f"rank-{r:05d}.pt" for r in range(4)),
    ]

    more = [*MODEL[:-1], "3"]
    resumed = two_nodes(["train", store, *more, "--checkpoint", str(checkpoint), "--resume"], nodes)
    assert [run.returncode for run in resumed] == [0, 0], resumed[0].stderr + resumed[1].stderr
    assert "at epoch 3" in resumed[0].stdout and len(losses(resumed[0].stdout)) == 1

    args = ["predict", store, "--checkpoint", str(checkpoint), "-o", str(output), "--grid", "2x2x1", "--use"]
    args += ["latest"]
    predicted = two_nodes(args, nodes)
    assert [run.returncode for run in predicted] == [0, 0], predicted[0].stderr + predicted[1].stderr
    last = re.search(r"^epoch +3 .*?(train \S+  valid \S+  test \S+)", resumed[0].stdout, flags=re.MULTILINE)
    assert last is not None and f"accuracy: {last.group(1)}" in predicted[0].stdout
    logits = zarr.open_group(str(output), mode="r")["logits"][:]
    assert logits.shape == (512, 6) and (logits != 0).any(axis=1).all()  # every node's row written
