"""A checkpoint used on a store of other features, classes or tasks than it was trained on is refused in one
line before any rank starts, by `gtool predict` and by `gtool train --resume`: a model with an output head
keeps the classes out of its widths, so its manifest records them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gtool.cli.main import app
from tests.support.stores import StoreFactory
from tests.trainer.checkpoints.test_checkpoint_folder import error_lines, snapshot

pytestmark = pytest.mark.integration  # trains with the command line

MODEL = ["--model", "scalegnn", "--layers", "2", "--hidden", "8", "--epochs", "1"]
SOURCES = {
    "4 classes": "sbm:512:4",
    "3 classes": "sbm:512:3",
    "5 classes": "sbm:512:5",
    "5 tasks": "sbm-multi:512:4:5",
    "2 classes": "sbm:512:2",
}


@pytest.fixture(scope="module")
def store(stores: StoreFactory):
    """The store of SOURCES[name]: 512 nodes and 32 features each."""
    return lambda name: stores(SOURCES[name], tiles=2, num_features=32)


@pytest.fixture(scope="module")
def trained(store, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Checkpoint folders of the 4-class store and of the 5-task one (read only by the tests)."""
    folders = {}
    for name in ("4 classes", "5 tasks"):
        ck = tmp_path_factory.mktemp("trained") / "ck"
        command = [sys.executable, "-m", "gtool.cli", "train", store(name), *MODEL, "--checkpoint", str(ck)]
        run = subprocess.run([*command, "-q"], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        folders[name] = ck
    return folders


def gtool(*args: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})
    return result.exit_code, error_lines(result.output)


@pytest.mark.parametrize(
    ("trained_on", "given", "stores_text"),
    [
        ("4 classes", "3 classes", ("32 features and 4 classes", "32 features and 3 classes")),
        ("4 classes", "5 classes", ("32 features and 4 classes", "32 features and 5 classes")),
        ("5 tasks", "2 classes", ("32 features and 5 tasks, multi-label", "32 features and 2 classes")),
    ],
)
def test_predict_refuses_a_store_of_other_classes(
    trained: dict[str, Path], store, tmp_path: Path, trained_on: str, given: str, stores_text: tuple
) -> None:
    """Fewer classes: exit 0 and logits of a mis-shaped head; more: a RuntimeError of a rank; a
    multi-label checkpoint on a 2-class store: logits that were not even its first two tasks."""
    output, ck = tmp_path / "out.zarr", trained[trained_on]
    status, lines = gtool("predict", store(given), "--checkpoint", str(ck), "-o", str(output))
    assert status == 2
    assert lines == [
        f"error: {ck / 'best-000001'} was trained on a store of {stores_text[0]}; "
        f"{store(given)} has {stores_text[1]}: the model's widths do not fit it"
    ]
    assert not output.exists()


def test_resume_refuses_a_store_of_other_classes(trained: dict[str, Path], store, tmp_path: Path) -> None:
    """--resume on a 3-class store: a rank's ValueError and a 7-frame traceback."""
    ck = tmp_path / "ck"
    shutil.copytree(trained["4 classes"], ck)
    before = snapshot(ck)
    run = subprocess.run(
        [sys.executable, "-m", "gtool.cli", "train", store("3 classes"), *MODEL[:-1], "2"]
        + ["--checkpoint", str(ck), "--resume"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2
    assert error_lines(run.stderr) == [
        f"error: {ck / 'epoch-000001'} was trained on a store of 32 features and 4 classes; "
        f"{store('3 classes')} has 32 features and 3 classes: the model's widths do not fit it"
    ]
    assert snapshot(ck) == before
