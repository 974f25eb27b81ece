"""Checkpoint manifests and folders that are not what gtool wrote: refused in one line before any rank does
per-rank work; a read-only device for a checkpoint or a prediction is one error line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gtool.cli.main import app
from tests.support.stores import StoreFactory
from tests.trainer.checkpoints.test_checkpoint_folder import snapshot

pytestmark = pytest.mark.integration  # trains with the command line

GTOOL = [sys.executable, "-m", "gtool.cli"]
MODEL = ["--layers", "2", "--hidden", "8", "--epochs", "2"]


@pytest.fixture(scope="module")
def store(stores: StoreFactory) -> str:
    return stores("rmat:9:8", tiles=4, num_features=32, num_classes=6)


@pytest.fixture(scope="module")
def trained(store: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint folder of a 2x1x1 run (read only by the tests: they change copies)."""
    ck = tmp_path_factory.mktemp("trained") / "ck"
    run = subprocess.run(
        [*GTOOL, "train", store, "--grid", "2x1x1", *MODEL, "--checkpoint", str(ck)], text=True
    )
    assert run.returncode == 0
    return ck


def crafted(trained: Path, folder: Path, change) -> Path:
    """A copy of the trained checkpoint folder whose manifest `change(manifest)` edited."""
    shutil.copytree(trained, folder)
    manifest = folder / json.loads((folder / "latest.json").read_text())["path"] / "manifest.json"
    content = json.loads(manifest.read_text())
    change(content, manifest.parent)
    manifest.write_text(json.dumps(content))
    return folder


def gtool(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})
    return result.exit_code, result.output


def set_key(section: str | None, key: str, value):
    def change(manifest: dict, folder: Path) -> None:
        (manifest[section] if section else manifest)[key] = value

    return change


def renamed_rank_file(manifest: dict, folder: Path) -> None:
    (folder / "rank-00001.pt").rename(folder / "rank-00002.pt")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            set_key("shape", "grid", [1000, 1000, 1000]),
            "grid of 1,000,000,000 ranks needs 1,000,000,000 rank files, the folder holds 2",
        ),
        (
            set_key("shape", "grid", [4, 1, 1]),
            "rank-00002.pt, rank-00003.pt missing; the folder holds only the files of ranks 0-1: it looks "
            "node-local (the other ranks' files on another node's own disk); copy them here, or train with "
            "a --checkpoint folder every node mounts",
        ),
        (renamed_rank_file, "rank-00001.pt missing"),
        (set_key("shape", "grid", [2, -1, 1]), "shape grid [2, -1, 1] is not a valid value"),
        (set_key("shape", "dims", "32"), 'shape dims "32" is not a valid value'),
        (set_key("shape", "transform_first", [True]), "transform_first does not give one order per layer"),
        (set_key("shape", "placement", "abc"), 'shape placement "abc" is not a valid value'),
        (set_key("model", "normalize_features", "l2"), "model options: --normalize-features must be one of"),
        (set_key("model", "colour", "red"), "model options: "),
        (set_key(None, "epoch", "ten"), 'epoch "ten" is not a valid value'),
    ],
    ids=[
        "huge-grid",
        "larger-grid",
        "renamed",
        "negative",
        "dims",
        "orders",
        "placement",
        "normalize",
        "key",
        "epoch",
    ],
)
def test_a_crafted_manifest_is_refused_in_one_line_at_once(
    trained: Path, tmp_path: Path, store: str, change, message: str
) -> None:
    """A grid of 10^9 ranks made predict build the geometry of every rank (100% CPU, memory growing) before
    it looked for a rank file; an invalid normalize_features was a traceback; the files of ranks 0-1 only
    (the others' on another node's disk) were called damaged or incomplete."""
    ck = crafted(trained, tmp_path / "ck", change)
    before = snapshot(tmp_path)
    for args in (
        ["predict", store, "--checkpoint", str(ck), "-o", str(tmp_path / "p"), "--use", "latest"],
        ["train", store, "--grid", "2x1x1", *MODEL, "--checkpoint", str(ck), "--resume"],
    ):
        status, output = gtool(*args)
        assert status == 2, output
        lines = output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and "manifest.json: " in lines[0], output
        node_local = "node-local" in message  # the files of one node's ranks: not said to be damaged
        assert message in lines[0] and ("the checkpoint is damaged or incomplete" in lines[0]) != node_local
    assert snapshot(tmp_path) == before


def test_resume_refuses_another_feature_normalization(trained: Path, tmp_path: Path, store: str) -> None:
    """--resume with another --normalize-features trained the checkpoint's weights on other inputs and
    recorded the new value (another --layer-order, which gives the same model, was refused)."""
    ck = tmp_path / "ck"
    shutil.copytree(trained, ck)
    before = snapshot(ck)
    status, output = gtool(
        "train",
        store,
        "--grid",
        "2x1x1",
        *MODEL,
        "--checkpoint",
        str(ck),
        "--resume",
        "--normalize-features",
        "row",
    )
    assert status == 2, output
    assert (
        "normalize_features: checkpoint none vs run row" in output and len(output.strip().splitlines()) == 1
    )
    assert snapshot(ck) == before


@pytest.mark.parametrize(
    ("switches", "run"),
    [
        (["--residual"], "residual"),
        (["--model", "scalegnn", "--no-bias"], "input_projection + norm + residual + output_head"),
    ],
)
def test_resume_refuses_another_model(
    trained: Path, tmp_path: Path, store: str, switches: list[str], run: str
) -> None:
    """--resume with --residual (widths unchanged) went on training the GCN's weights as another model;
    with --model scalegnn its ranks started, then failed naming widths and layer orders."""
    ck = tmp_path / "ck"
    shutil.copytree(trained, ck)
    before = snapshot(ck)
    status, output = gtool(
        "train", store, "--grid", "2x1x1", *MODEL, "--checkpoint", str(ck), "--resume", *switches
    )
    assert status == 2, output
    assert f"components: checkpoint GCN layers alone vs run {run}" in output
    assert len(output.strip().splitlines()) == 1
    assert snapshot(ck) == before


def test_a_checkpoint_that_predates_the_models_resumes_as_a_gcn(
    trained: Path, tmp_path: Path, store: str
) -> None:
    """A manifest without components or model options was written by a GCN run: resumed by one."""

    def older(manifest: dict, folder: Path) -> None:
        del manifest["shape"]["components"], manifest["model"]

    ck = crafted(trained, tmp_path / "ck", older)
    args = ["train", store, "--grid", "2x1x1", *MODEL, "--checkpoint", str(ck), "--resume", "--epochs", "3"]
    status, output = gtool(*args, "--residual")
    assert status == 2 and "components: checkpoint GCN layers alone vs run residual" in output, output
    status, output = gtool(*args)
    assert status == 0, output


@pytest.mark.parametrize("inside", ["pred.zarr", "."])
def test_a_prediction_into_the_store_is_refused(
    trained: Path, tmp_path: Path, store: str, inside: str
) -> None:
    """`predict -o STORE/pred.zarr` used to write a Zarr group into the store it read."""
    copy = shutil.copytree(store, tmp_path / "s.zarr")
    before = snapshot(tmp_path)
    output = copy / inside if inside != "." else copy
    status, text = gtool("predict", str(copy), "--checkpoint", str(trained), "-o", str(output), "--overwrite")
    assert status == 2, text
    where = "the store" if inside == "." else f"inside the store {copy}"
    assert text.splitlines() == [
        f"error: -o {output}: {where} (the run's files would change it); name a place outside it"
    ]
    assert snapshot(tmp_path) == before


def read_only(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """`gtool ARGS` in a mount namespace where `folder` is a read-only bind mount of itself."""
    command = f'mount --bind -o ro {folder} {folder} && exec "$@"'
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", command, "sh", *GTOOL, *args], capture_output=True, text=True
    )


def test_a_read_only_device_is_one_error_line(trained: Path, tmp_path: Path, store: str) -> None:
    """`predict -o` and `train --checkpoint` on a read-only mount were an OSError traceback."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"]).returncode != 0:
        pytest.skip("needs mount namespaces (unshare -m) to make a read-only mount")
    shutil.copytree(trained, tmp_path / "ck")
    before = snapshot(tmp_path)
    for args, where in (
        (["predict", store, "--checkpoint", str(tmp_path / "ck"), "-o", str(tmp_path / "p")], tmp_path / "p"),
        (["train", store, *MODEL, "--checkpoint", str(tmp_path / "new")], tmp_path / "new"),
        (
            ["train", store, "--grid", "2x1x1", *MODEL, "--checkpoint", str(tmp_path / "ck"), "--resume"],
            tmp_path / "ck",
        ),
    ):
        run = read_only(tmp_path, *args)
        if "mount: " in run.stderr:
            pytest.skip(f"cannot make a read-only mount here: {run.stderr.strip()}")
        assert run.returncode == 2, run.stderr
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {where}"), run.stderr
        assert "read-only file system" in lines[0]
    assert snapshot(tmp_path) == before
