"""`gtool train` and `gtool predict` on two torchrun "nodes" of two ranks each, started from different working
folders on this machine: node-local or relative locations are refused before any work, shared ones train
and predict as one machine does."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
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


def start_two_nodes(
    args: list[str], cwds: list[Path], wraps: tuple[list[str], list[str]] = ([], [])
) -> list[subprocess.Popen]:
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
    return launches


def ended(launch: subprocess.Popen, timeout: float = 300) -> subprocess.CompletedProcess:
    """The launch once ended (killed with its ranks, and failing the test, if still running after
    `timeout` seconds)."""
    try:
        stdout, stderr = launch.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(launch.pid)
        stdout, stderr = launch.communicate()
        pytest.fail(f"{launch.args} still ran {timeout:g} s later: {stderr[-2000:]}")
    return subprocess.CompletedProcess(launch.args, launch.returncode, stdout, stderr)


def kill_tree(pid: int) -> None:
    """SIGKILL to process `pid` and every process under it (a node that dies: torchrun and its ranks)."""
    root = psutil.Process(pid)
    for process in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()


def two_nodes(
    args: list[str], cwds: list[Path], wraps: tuple[list[str], list[str]] = ([], [])
) -> list[subprocess.CompletedProcess]:
    """`start_two_nodes`, once both launches ended."""
    return [ended(launch) for launch in start_two_nodes(args, cwds, wraps)]


def workers(launch: subprocess.Popen) -> list[psutil.Process]:
    """The ranks a torchrun launch started (so far)."""
    below = psutil.Process(launch.pid).children(recursive=True)
    return [p for p in below if "gtool.cli" in p.cmdline() and "torch.distributed.run" not in p.cmdline()]


def at_the_rendezvous(rank: psutil.Process, launch: subprocess.Popen) -> bool:
    """Whether `rank` is connected to the launch's --master-port (the store it joins the world in)."""
    port = int(launch.args[launch.args.index("--master-port") + 1])
    return any(c.raddr and c.raddr.port == port for c in rank.net_connections("tcp"))


def gtool_errors(stderr: str) -> set[str]:
    """The distinct errors gtool's ranks printed (each rank of a node prints its own)."""
    return {
        re.sub(r"^error: (rank \d+ failed: GtoolError: )?", "", line)
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


def test_a_node_that_refuses_ends_the_others_wait_at_once(store: str, nodes: list[Path]) -> None:
    """Node 1, whose folder lacks the store (a relative path), refused before its ranks joined: node 0's
    ranks waited silently for the rendezvous until the 30-minute start timeout."""
    shutil.copytree(store, nodes[0] / "s.zarr")
    launches = start_two_nodes(["train", "s.zarr", *MODEL], nodes)
    refused = ended(launches[1])
    waited = ended(launches[0], timeout=90)  # after node 1 ended: it ends at once, not at the timeout
    refusal = "s.zarr: not a gtool store (s.zarr does not exist)"
    assert refused.returncode != 0 and gtool_errors(refused.stderr) == {refusal}, refused.stderr
    host = os.uname().nodename
    assert waited.returncode != 0 and "epoch " not in waited.stdout
    [error] = gtool_errors(waited.stderr)  # both of node 0's ranks name node 1's first refusal
    first = {f"rank {rank} failed: on host {host}, before joining the run: {refusal}" for rank in (2, 3)}
    assert error in first, waited.stderr


def test_sigterm_ends_ranks_that_wait_to_join(store: str, nodes: list[Path]) -> None:
    """Ranks waiting for the rendezvous ignored SIGTERM (only kill -9 ended them)."""
    launches = start_two_nodes(["train", store, *MODEL], nodes)
    try:
        while len(late := workers(launches[1])) < 2:  # node 1's ranks never come to the rendezvous
            time.sleep(0.02)
        for rank in late:
            rank.suspend()
        while len(waiting := workers(launches[0])) < 2:
            time.sleep(0.02)
        while not all(at_the_rendezvous(rank, launches[0]) for rank in waiting):
            time.sleep(0.1)
        time.sleep(1)  # node 0's ranks wait to join (they poll the rendezvous store)
        for rank in waiting:
            rank.terminate()
        _, alive = psutil.wait_procs(waiting, timeout=60)
        assert alive == []
        assert (
            "terminated: the latest complete checkpoint (if any) can be resumed" in ended(launches[0]).stderr
        )
    finally:
        kill_tree(launches[1].pid)
        launches[1].communicate()


def test_a_node_that_dies_mid_epoch_is_named_in_one_line(store: str, nodes: list[Path]) -> None:
    """The survivors blamed their own rank 0 or a local peer that ended after it, with a traceback of
    "Connection reset by peer"; they name the ranks lost with node 1."""
    launches = start_two_nodes(["train", store, *MODEL[:-1], "100000", "--eval-every", "1000"], nodes)
    assert launches[0].stdout is not None
    for line in launches[0].stdout:
        if line.startswith("epoch "):
            break
    kill_tree(launches[1].pid)
    launches[1].communicate()
    survivor = ended(launches[0], timeout=120)
    errors = gtool_errors(survivor.stderr)
    host = os.uname().nodename
    assert len(errors) == 2, survivor.stderr  # each rank of node 0 says what it saw, in one line
    for error in errors:
        assert error.startswith(f"ranks 2, 3 (on host {host}) lost: "), survivor.stderr
    assert not re.search(r'File ".*gtool', survivor.stderr), survivor.stderr  # torchrun's traceback alone
