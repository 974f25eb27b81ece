"""`gtool plan` and `gtool train --grid auto` run the way a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gtool.architecture import ModelConfig
from gtool.cli.main import app
from gtool.geometry.collectives import bytes_by_group, epoch_collectives
from gtool.geometry.grid import ProcessGrid
from gtool.geometry.shapes import layer_shapes
from gtool.plan.calibration.machine import torch_version
from tests.support.imports import REPORTING_GTOOL, imported
from tests.support.stores import StoreFactory

GTOOL = [sys.executable, "-m", "gtool.cli"]


def gtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*GTOOL, *args], capture_output=True, text=True, timeout=300)


def plan(*args: str):
    """`gtool plan ARGS` in this process (the ranks of `gtool train` need a real process)."""
    return CliRunner().invoke(app, ["plan", *args])


@pytest.fixture(scope="module")
def store(stores: StoreFactory) -> str:
    return stores("rmat:9:8", tiles=4, num_features=12)


def test_plan_ranks_every_grid_and_explains_the_best(store: str) -> None:
    done = plan(store, "--ranks", "4", "--hidden", "16", "--json")
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    grids = {g["grid"]: g for g in result["grids"]}
    assert len(grids) == 6 and result["best"] == result["grids"][0]["grid"]
    assert "fastest predicted epoch" in result["reason"] and "this machine's profile" in result["profile"]
    times = [g["epoch_seconds"] for g in result["grids"]]
    assert times == sorted(times)
    widths = ModelConfig(hidden=16).widths(12, result["widths"][-1])
    shapes = layer_shapes(ProcessGrid(2, 2, 1), 512, widths, ModelConfig(hidden=16).orders(12, widths[-1]))
    assert grids["2x2x1"]["comm_bytes"] == bytes_by_group(epoch_collectives(shapes, False), 4)
    table = plan(store, "--ranks", "4", "--hidden", "16")
    assert table.exit_code == 0 and "best" in table.stdout and result["best"] in table.stdout


def test_plan_marks_grids_over_the_memory_limit(store: str) -> None:
    result = json.loads(plan(store, "--ranks", "2", "--memory-per-rank", "1KB", "--json").stdout)
    assert result["best"] is None and not any(g["fits"] for g in result["grids"])
    assert result["reason"].startswith("no grid fits 1.0 KiB per rank and --memory-limit ")  # was 0.00 GiB


def test_plan_reports_bad_input_clearly(store: str, tmp_path: Path) -> None:
    missing = gtool("plan", store, "--ranks", "2", "--profile", str(tmp_path / "none.json"))
    assert missing.returncode == 2 and "no such profile" in missing.stderr
    for args, message in [
        ((store,), "needs STORE and --ranks"),
        (("--calibrate",), "-o FILE.json"),
        ((store, "--ranks", "2", "--memory-per-rank", "lots"), "--memory-per-rank"),
        ((store, "--ranks", "2", "--batch-size", "513"), "--batch-size 513 is more than the 512 nodes"),
    ]:
        done = plan(*args)
        assert done.exit_code == 2 and message in done.output, done.output
    auto = CliRunner().invoke(app, ["train", store, "--grid", "auto", "--ranks", "2", "--batch-size", "513"])
    assert auto.exit_code == 2 and "513 is more than the 512 nodes" in auto.output
    assert "--grid auto chose" not in auto.output  # refused before planning


def test_calibrate_checks_its_output_before_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--calibrate -o` on a place that cannot be written used to measure for minutes, then end in a
    FileNotFoundError traceback."""
    import gtool.plan.calibration.microbench as microbench

    def measured(*args: object) -> None:
        raise AssertionError("measured before the output was checked")

    monkeypatch.setattr(microbench, "calibrate", measured)
    (tmp_path / "file").write_text("")
    before = sorted(p.name for p in tmp_path.iterdir())
    for output, error in (
        (
            "/proc/gtool-profile.json",
            "-o /proc/gtool-profile.json: cannot be written (its folder takes no new files)",
        ),
        (str(tmp_path), f"-o {tmp_path}: a folder; name a file for the profile"),
        (
            str(tmp_path / "file" / "p.json"),
            f"{tmp_path / 'file'} (the folder of -o): not a folder: a file is in the way (there, or above)",
        ),
    ):
        done = CliRunner().invoke(app, ["plan", "--calibrate", "-q", "-o", output], env={"COLUMNS": "300"})
        assert done.exit_code == 2, done.output
        assert done.output.splitlines() == [f"error: {error}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert not Path("/proc/gtool-profile.json").exists()
    for flag in ("--threads", "--max-group"):  # --threads -3 was torch's RuntimeError traceback
        done = CliRunner().invoke(app, ["plan", "--calibrate", "-o", str(tmp_path / "p.json"), flag, "-3"])
        assert done.exit_code == 2 and done.output.splitlines() == [f"error: {flag} must be >= 1, got -3"]
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_plan_refuses_more_ranks_than_it_prices_before_any_work(store: str) -> None:
    """--ranks 1000000 on a small store: one error line at once (it took 15.9 GB and minutes)."""
    done = gtool("plan", store, "--ranks", "1000000")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "error: --ranks 1,000,000: gtool plan prices grids of up to 16,384 ranks (it prices every rank of "
        "every grid, so its time and memory grow with the ranks)"
    ]
    auto = gtool("train", store, "--grid", "auto", "--ranks", "1000000")
    assert auto.returncode == 2 and auto.stderr.startswith("error: ") and "calibrating" not in auto.stderr


def test_plan_refuses_rank_counts_of_too_many_grids_before_any_work(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--ranks 15120 (1,350 grids of 15,120 ranks: 7 GB and a MemoryError as JSON) and a mini-batch plan of
    3,584 layouts are refused in one line, before calibrating; 16,384 ranks (120 grids) are priced."""
    monkeypatch.setenv("GTOOL_CACHE", str(tmp_path))
    for args, count in [
        (("15120",), "1,350 grids hold 20,412,000 ranks"),
        (("3360", "--batch-size", "16"), "3,584 D x grid layouts"),
    ]:
        done = gtool("plan", store, "--ranks", *args, "--json")
        assert done.returncode == 2 and done.stdout == ""
        assert (
            done.stderr.startswith(f"error: --ranks {int(args[0]):,}: its {count}")
            and "up to 2,000 layouts of up to 4,000,000 ranks" in done.stderr
        )
        assert len(done.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # refused before calibrating this machine


def test_plan_json_is_one_grid_per_line_valid_as_a_whole(store: str) -> None:
    """The JSON is written a grid at a time (cli.jsonstream), one per line: each line is a grid's
    figures, and the whole is the plan's JSON object."""
    done = gtool("plan", store, "--ranks", "24", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert len(result["grids"]) == 30 and result["best"] == result["grids"][0]["grid"]
    lines = done.stdout.splitlines()
    start = lines.index(' "grids": [')
    for line, grid in zip(lines[start + 1 :], result["grids"], strict=False):
        assert json.loads(line.strip().rstrip(",")) == grid
    assert lines[start + 31 :] == [" ]", "}"]


def test_plan_calibrates_this_machine_on_first_use_and_keeps_it(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --profile, the first plan measures this machine (a line on stderr), later ones read its
    cached profile, without importing torch (0.7 s); --recalibrate measures again; --profile shipped is
    gtool's own."""
    monkeypatch.setenv("GTOOL_CACHE", str(tmp_path))
    first = gtool("plan", store, "--ranks", "2", "--json")
    assert first.returncode == 0, first.stderr
    assert first.stderr.startswith("calibrating this machine for gtool plan")
    (cached,) = (tmp_path / "plan").glob("profile-*.json")
    assert "calibrated just now" in json.loads(first.stdout)["profile"]
    second = gtool("plan", store, "--ranks", "2", "--json")
    assert "calibrating" not in second.stderr
    assert json.loads(second.stdout)["profile"].startswith(f"this machine's profile ({cached};")
    assert json.loads(second.stdout)["grids"] == json.loads(first.stdout)["grids"]
    timed = subprocess.run(
        [*REPORTING_GTOOL, "plan", store, "--ranks", "2"], capture_output=True, text=True, timeout=300
    )
    assert timed.returncode == 0 and "torch" not in imported(timed.stderr)  # the cached profile, no torch
    shipped = gtool("plan", store, "--ranks", "2", "--json", "--profile", "shipped")
    assert "shipped profile" in json.loads(shipped.stdout)["profile"] and "calibrating" not in shipped.stderr
    both = gtool("plan", store, "--ranks", "2", "--recalibrate", "--profile", "shipped")
    assert both.returncode == 2 and "--recalibrate measures this machine" in both.stderr
    before = cached.stat().st_mtime_ns
    again = gtool("plan", store, "--ranks", "2", "--recalibrate")
    assert again.returncode == 0 and again.stderr.startswith("calibrating this machine")
    assert cached.stat().st_mtime_ns != before


def test_plan_refuses_a_folder_as_its_profile(store: str, tmp_path: Path) -> None:
    """`gtool plan --profile DIR`: an IsADirectoryError traceback."""
    done = plan(store, "--ranks", "2", "--profile", str(tmp_path))
    assert done.exit_code == 2 and done.output.strip().splitlines() == [
        f"error: {tmp_path}: a folder; expected a profile JSON file (gtool plan --calibrate -o FILE)"
    ]


def test_plan_keeps_the_profile_in_the_users_cache_and_q_silences_it(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The profile was cached under ./data/gtool-cache of the working folder (another folder calibrated
    again), `-q` still printed its notice, and `gtool cache list` called it 'not gtool's copies'."""
    monkeypatch.delenv("GTOOL_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    for folder in (tmp_path / "a", tmp_path / "b"):
        folder.mkdir()
        command = [*GTOOL, "plan", store, "--ranks", "2", "-q"]
        run = subprocess.run(command, capture_output=True, text=True, cwd=folder)
        assert run.returncode == 0 and run.stderr == "" and "1x2x1" in run.stdout, run.stderr
        assert list(folder.iterdir()) == []
    (profile,) = (tmp_path / "xdg" / "gtool" / "plan").iterdir()  # calibrated once, for both folders
    monkeypatch.setenv("GTOOL_CACHE", str(tmp_path / "xdg" / "gtool"))
    listed = gtool("cache", "list")
    assert listed.returncode == 0 and "not gtool's copies" not in listed.stderr
    kernels = profile.parent.parent / "numba"  # the plan's calibration trains with them
    assert listed.stderr == (
        f"{profile.parent}: gtool plan's machine profiles and --grid auto trials (1 file), not copies: left "
        f"alone (`gtool plan --recalibrate` measures them again)\n{kernels}: gtool's compiled CPU kernels, "
        "not copies: left alone (compiled again when removed)\n"
    )


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("spmm.seconds_per_row_col", -3.0, "a finite number >= 0"),  # ranked grids by -3,856,598 s epochs
        ("gemm.seconds_per_flop", float("nan"), "a finite number >= 0"),
        ("spmm.widths.0", 0, "a number > 0"),
        ("collectives.2.latency", float("inf"), "a finite number >= 0"),
        ("epochs.1.dense", 0, "a number > 0"),
    ],
)
def test_plan_refuses_a_profile_with_a_cost_that_is_not_a_cost(
    store: str, tmp_path: Path, key: str, value: float, expected: str
) -> None:
    content = json.loads(_shipped_profile())
    part = content
    *path, last = key.split(".")
    for name in path:
        part = part[int(name)] if isinstance(part, list) else part[name]
    part[int(last) if isinstance(part, list) else last] = value
    profile = tmp_path / "bad.json"
    profile.write_text(json.dumps(content))
    done = plan(store, "--ranks", "2", "--profile", str(profile))
    assert done.exit_code == 2  # and the one error line is all it printed, on either stream:
    assert done.output.splitlines() == [f"error: {profile}: {key} is {value!r}, expected {expected}"]


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (
            "spmm.seconds_per_row_col",
            "fast",
            "spmm.seconds_per_row_col is 'fast', expected a finite number >= 0",
        ),
        ("gemm.seconds_per_flop", None, "gemm.seconds_per_flop is None, expected a finite number >= 0"),
        ("gemm.seconds_per_flop", True, "gemm.seconds_per_flop is True, expected a finite number >= 0"),
        ("gemm.seconds_per_byte", [1e-9], "gemm.seconds_per_byte is [1e-09], expected a number"),
        ("spmm.widths", [128, 16, 64], "spmm.widths.1 is 16 after 128, expected sizes that increase"),
        ("allocation.sizes", [2.0, 1.0], "allocation.sizes.1 is 1.0 after 2.0, expected sizes that increase"),
        ("threads", -3, "threads is -3, expected a whole number >= 1"),
        ("threads", 0, "threads is 0, expected a whole number >= 1"),
        ("threads", 2.5, "threads is 2.5, expected a whole number >= 1"),
        (
            "collectives.0",
            {"latency": 1e-3, "seconds_per_byte": 1e-9},
            "collectives has the key '0', expected",
        ),
        ("epochs.x", {}, "epochs has the key 'x', expected numbers of ranks (whole numbers >= 1) as keys"),
    ],
)
def test_plan_refuses_a_profile_whose_values_are_not_numbers_or_in_order(
    store: str, tmp_path: Path, key: str, value: object, expected: str
) -> None:
    """A word or null for a cost was a numpy traceback; threads -3, a rank count 0 as a key, and table
    axes out of order (interpolated as if sorted: wrong costs) were used without a word."""
    content = json.loads(_shipped_profile())
    *path, last = key.split(".")
    part = content
    for name in path:
        part = part[name]
    part[last] = value
    profile = tmp_path / "bad.json"
    profile.write_text(json.dumps(content))
    done = plan(store, "--ranks", "2", "--profile", str(profile))
    assert done.exit_code == 2
    [line] = done.output.splitlines()
    assert line.startswith(f"error: {profile}: {expected}"), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]


def _shipped_profile() -> str:
    from importlib import resources

    return resources.files("gtool.plan.costmodel").joinpath("default-profile.json").read_text()


def test_train_grid_auto_trains_on_the_planned_grid(store: str, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    args = [
        "train",
        store,
        "--grid",
        "auto",
        "--ranks",
        "2",
        "--gpus-per-node",
        "1",
        "--hidden",
        "16",
        "--epochs",
        "2",
        "--log",
        str(log),
    ]
    done = gtool(*args)
    assert done.returncode == 0, done.stderr
    chosen, placed = done.stderr.split("--grid auto chose ")[1].split(":")[0].split(", placed ")
    assert ProcessGrid(*map(int, chosen.split("x")), placed).size == 2
    assert f"grid {chosen}" in done.stderr
    epochs = [json.loads(line) for line in log.read_text().splitlines() if '"summary"' not in line]
    assert len(epochs[0]["comm_bytes"]) == 2
    assert "--ranks goes with --grid auto" in gtool("train", store, "--grid", "2x1x1", "--ranks", "2").stderr
    fixed = CliRunner().invoke(app, ["train", store, "--grid", "auto", "--ranks", "2", "--placement", "yxz"])
    assert fixed.exit_code == 2 and "--placement goes with an explicit --grid" in fixed.output
    given = ["train", store, "--grid", "auto", "--ranks", "4", "--batch-size", "64", "--data-parallel", "3"]
    odd = CliRunner().invoke(app, given)
    assert odd.exit_code == 2 and "--data-parallel 3 does not divide the 4 ranks" in odd.output


def test_the_machine_key_reads_torch_s_version_without_importing_it() -> None:
    import torch

    assert torch_version() == torch.__version__
