"""Plan benchmark: `gtool plan`'s predicted epoch time against `gtool train`'s measured one, grid by grid.

    python -m gtool.cli plan --calibrate -o bench/results/plan/profile.json     # on an idle machine
    python -m bench.bench_plan --scales 15 --hiddens 32,128                   # runs, saved per case
    python -m bench.bench_plan --report                                       # the table and the fit

Stores: rmat:SCALE:8 (16x16 tiles, 128 features, 32 classes) built once into bench/results/plan/. A case
is one (scale, hidden); its grids (1x1x1 and every grid of 2 ranks) take turns over --rounds rounds,
each round running every grid once, starting one grid further on, so that a slow spell of the machine
hits all grids alike. Every run is `gtool train STORE --grid G --hidden H` with the default model
otherwise (3 layers, dropout 0.5), one torch thread per rank, E epochs; its first WARMUP epochs are
left out, as `gtool plan --calibrate` leaves them out. E is --epochs, or by default enough epochs for
about --steady-seconds of steady epochs (from the plan's 1x1x1 prediction; 2 to 24 of them). A grid's
measured figure is the median of its steady epochs over all rounds. The prediction is gtool.plan's for
the same store, grid, model and profile.

`--report` gathers every saved case, predicts it afresh with --profile, and prints R^2 of measured
against predicted (1 - SS_res / SS_tot around the identity line, and the squared correlation) over
every grid, and, per case and rank count with a choice (P = 2: 2x1x1, 1x2x1, 1x1x2), whether the grid
predicted fastest (what `gtool plan --ranks P` picks) is the measured fastest or within 5% of it, and
the benchmark's own agreement: the best grid of the even rounds measured by the odd ones, and the other
way round (no model can agree with the measurements more often than they agree with themselves).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.common import REPO, build_store, steal_seconds
from bench.common import RESULTS as BENCH_RESULTS
from gtool.geometry.grid import parse_dims

RESULTS = BENCH_RESULTS / "plan"
GRIDS = ("1x1x1", "2x1x1", "1x2x1", "1x1x2")
WITHIN = 0.05
PHASES = ("seconds", "spmm", "dense", "comm")
WARMUP = 2
MIN_STEADY, MAX_STEADY = 2, 24


def store_path(scale: int) -> Path:
    return RESULTS / f"rmat-{scale}-8.zarr"


def predicted_seconds(store: str, grid: str, hidden: int, profile: str) -> dict:
    """gtool.plan's epoch time for one grid (and its split)."""
    from gtool.architecture import ModelConfig
    from gtool.geometry.grid import ProcessGrid
    from gtool.plan.costmodel.planner import PlanRequest, estimate_grid
    from gtool.plan.costmodel.profile import load_profile
    from gtool.store.cells import shard_table
    from gtool.store.reader import open_store

    opened = open_store(store)
    dims = ProcessGrid(*map(int, grid.split("x")))
    request = PlanRequest(dims.size, ModelConfig(hidden=hidden))
    widths = request.model.widths(opened.num_features, opened.num_classes)
    table = shard_table(opened, set(dims.dims))
    estimate = estimate_grid(dims, table, widths, request, load_profile(profile)[0], opened.num_classes)
    summary = estimate.summary()
    keys = ("epoch_seconds", "spmm_seconds", "dense_seconds", "comm_seconds", "overhead_seconds")
    return {key: summary[key] for key in keys}


def train_epochs(store: str, grid: str, hidden: int, epochs: int) -> dict:
    """`gtool train` on `grid`: every epoch's phase times (from its --log) and the CPU steal of the run."""
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "log.jsonl"
        command = [sys.executable, "-m", "gtool.cli", "train", store, "--grid", grid, "--hidden", str(hidden)]
        command += ["--epochs", str(epochs), "--eval-every", str(epochs), "--threads", "1", "--log", str(log)]
        stolen = steal_seconds()
        subprocess.run(command, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
        stolen = steal_seconds() - stolen
        records = [json.loads(line) for line in log.read_text().splitlines() if '"summary"' not in line]
    return {"epochs": [{name: r[name] for name in PHASES} for r in records], "steal_s": stolen}


def case_epochs(scale: int, hidden: int, steady_seconds: float, profile: str) -> int:
    """Epochs per run of a case: WARMUP, then enough for about `steady_seconds` of steady epochs on one rank
    (by the plan's prediction for 1x1x1), between MIN_STEADY and MAX_STEADY of them. Small stores' epochs
    take a tenth of a second: two of them would be a sample of the machine's jitter, not of the grid."""
    predicted = predicted_seconds(str(store_path(scale)), "1x1x1", hidden, profile)["epoch_seconds"]
    return WARMUP + int(np.clip(np.ceil(steady_seconds / predicted), MIN_STEADY, MAX_STEADY))


def taking_turns(
    store: str, grids: Sequence[str], hidden: int, epochs: int, rounds: int, label: str
) -> dict[str, list[dict]]:
    """Every grid's runs on `store`, in round order: each round runs every grid once, starting one grid
    further on, so that a slow spell of the machine hits all grids alike."""
    runs: dict[str, list[dict]] = {grid: [] for grid in grids}
    for turn in range(rounds):
        for grid in [*grids[turn % len(grids) :], *grids[: turn % len(grids)]]:
            run = train_epochs(store, grid, hidden, epochs)
            runs[grid].append(run)
            steady = np.median([e["seconds"] for e in run["epochs"][WARMUP:]])
            print(f"{label} round {turn} {grid}: {steady:.3f} s", flush=True)
    return runs


def run_case(scale: int, hidden: int, epochs: int, rounds: int) -> list[dict]:
    """Every grid of one case, taking turns over `rounds` rounds: per grid its runs in round order."""
    runs = taking_turns(
        str(store_path(scale)), GRIDS, hidden, epochs, rounds, f"rmat:{scale}:8 hidden {hidden:3d}"
    )
    return [{"scale": scale, "hidden": hidden, "grid": grid, "runs": runs[grid]} for grid in GRIDS]


def steady_seconds(row: dict, rounds: slice = slice(None)) -> float:
    """The median steady epoch time of a grid over its runs in `rounds`."""
    return float(np.median([e["seconds"] for run in row["runs"][rounds] for e in run["epochs"][WARMUP:]]))


def r_squared(measured: np.ndarray, predicted: np.ndarray) -> tuple[float, float]:
    """(1 - SS_res / SS_tot with predictions taken as they are, squared Pearson correlation)."""
    residual = float(((measured - predicted) ** 2).sum())
    total = float(((measured - measured.mean()) ** 2).sum())
    return 1 - residual / total, float(np.corrcoef(measured, predicted)[0, 1] ** 2)


def excess(case: list[dict], chosen: dict, times: dict[str, float]) -> float:
    """How much slower `chosen` measured (by `times`, per grid) than the case's fastest grid."""
    return times[chosen["grid"]] / min(times[r["grid"]] for r in case) - 1


def agreement(case: list[dict]) -> float:
    """The benchmark against itself: of the two ways round (even rounds' best grid judged by the odd
    rounds' times, and odd by even), the share within WITHIN of the best."""
    halves = [{r["grid"]: steady_seconds(r, slice(start, None, 2)) for r in case} for start in (0, 1)]
    agree = 0.0
    for mine, other in ((0, 1), (1, 0)):
        best = min(case, key=lambda r: halves[mine][r["grid"]])
        agree += 0.5 * (excess(case, best, halves[other]) <= WITHIN)
    return agree


def report(files: list[Path], profile: str) -> None:
    """The table and fit of every saved case, predictions made afresh with `profile`."""
    rows = [row for f in files for row in json.loads(f.read_text())["rows"]]
    for r in rows:
        r["measured"] = steady_seconds(r)
        r["predicted"] = predicted_seconds(str(store_path(r["scale"])), r["grid"], r["hidden"], profile)
    print(
        f"{'store':12s} {'hidden':>6s} {'grid':>6s} {'runs':>4s} {'measured s':>10s} {'predicted s':>11s}",
        end="",
    )
    print(f" {'ratio':>6s} {'spread':>6s}")
    for r in rows:
        m, p = r["measured"], r["predicted"]["epoch_seconds"]
        per_run = [steady_seconds(r, slice(i, i + 1)) for i in range(len(r["runs"]))]
        spread = (max(per_run) - min(per_run)) / m
        print(
            f"rmat:{r['scale']}:8  {r['hidden']:6d} {r['grid']:>6s} {len(r['runs']):4d} {m:10.3f} {p:11.3f}",
            end="",
        )
        print(f" {p / m:6.2f} {spread:6.2f}")
    measured = np.array([r["measured"] for r in rows])
    predicted = np.array([r["predicted"]["epoch_seconds"] for r in rows])
    identity, correlation = r_squared(measured, predicted)
    log_identity, _ = r_squared(np.log(measured), np.log(predicted))
    print(
        f"\n{len(rows)} grids: R^2 {identity:.3f} (identity line), {correlation:.3f} (squared correlation), "
        f"{log_identity:.3f} (identity, log times)"
    )
    cases: dict[tuple, list[dict]] = {}
    for r in rows:
        cases.setdefault((r["scale"], r["hidden"], ranks(r["grid"])), []).append(r)
    choices = {key: case for key, case in sorted(cases.items()) if len(case) > 1}
    hits, ordered, agreed = 0, 0, 0.0
    print(
        f"\n{'store':12s} {'hidden':>6s} {'P':>2s} {'predicted best':>14s} {'measured best':>13s}",
        end="",
    )
    print(f" {'its excess':>10s} {'same order':>10s} {'self-agreement':>14s}")
    for (scale, hidden, size), case in choices.items():
        times = {r["grid"]: r["measured"] for r in case}
        chosen = min(case, key=lambda r: r["predicted"]["epoch_seconds"])
        fastest = min(case, key=lambda r: r["measured"])
        over = excess(case, chosen, times)
        same = ranking(case, "predicted") == ranking(case, "measured")
        hits += over <= WITHIN
        ordered += same
        agreed += agreement(case)
        print(
            f"rmat:{scale}:8  {hidden:6d} {size:2d} {chosen['grid']:>14s} {fastest['grid']:>13s}",
            end="",
        )
        print(f" {100 * over:9.1f}% {'yes' if same else 'no':>10s} {agreement(case):14.1f}")
    within = f"the measured best or within {100 * WITHIN:.0f}%"
    print(f"predicted best of P ranks is {within}: {hits} of {len(choices)} cases with a choice")
    print(f"every grid of the case in the measured order: {ordered} of {len(choices)} cases")
    print(f"the benchmark agrees with itself (even rounds against odd): {agreed:.1f} of {len(choices)} cases")


def ranking(case: list[dict], by: str) -> list[str]:
    """The grids of a case from fastest to slowest, by their measured or predicted epoch time."""
    key = (lambda r: r["measured"]) if by == "measured" else (lambda r: r["predicted"]["epoch_seconds"])
    return [r["grid"] for r in sorted(case, key=key)]


def ranks(grid: str) -> int:
    """The rank count of a grid written GXxGYxGZ."""
    return math.prod(parse_dims(grid, 3, "grid"))


def grid_runs(store: str, ranks_: int, hidden: int, epochs: int, rounds: int) -> list[dict]:
    """Every grid of `ranks_` ranks on `store`, taking turns over `rounds` rounds (as run_case)."""
    from gtool.geometry.shapes import factorizations

    grids = ["x".join(map(str, g.dims)) for g in factorizations(ranks_)]
    runs = taking_turns(store, grids, hidden, epochs, rounds, Path(store).name)
    return [{"store": store, "hidden": hidden, "grid": grid, "runs": runs[grid]} for grid in grids]


def plan_epochs(store: str, ranks_: int, hidden: int, profile: str | None) -> dict[str, float]:
    """`gtool plan STORE --ranks P --json`'s predicted epoch seconds per grid (profile None: the machine's
    own, calibrated on first use)."""
    command = [sys.executable, "-m", "gtool.cli", "plan", store, "--ranks", str(ranks_)]
    command += ["--hidden", str(hidden), "--json", *(["--profile", profile] if profile else [])]
    done = subprocess.run(command, check=True, cwd=REPO, capture_output=True, text=True)
    return {g["grid"]: g["epoch_seconds"] for g in json.loads(done.stdout)["grids"]}


def auto_pick(store: str, ranks_: int, hidden: int) -> str:
    """The grid `gtool train --grid auto --ranks P` trains on, its trial of the close grids run afresh (in
    a cache folder of its own, holding a copy of this machine's profiles)."""
    from gtool.plan import machine_folder

    with tempfile.TemporaryDirectory(prefix="bench-plan-auto-") as cache:
        profiles = machine_folder()
        if profiles.is_dir():
            shutil.copytree(profiles, Path(cache) / profiles.name)
        for trial in (Path(cache) / profiles.name).glob("trials-*.json"):
            trial.unlink()
        command = [sys.executable, "-m", "gtool.cli", "train", store, "--grid", "auto"]
        command += ["--ranks", str(ranks_), "--hidden", str(hidden), "--epochs", "1", "-q"]
        env = {**os.environ, "GTOOL_CACHE": cache}
        done = subprocess.run(command, check=True, cwd=REPO, capture_output=True, text=True, env=env)
    return done.stderr.split("--grid auto chose ")[1].split(",")[0]


def grid_report(saved: Path, profiles: dict[str, str | None]) -> None:
    """Measured against predicted epoch time of every grid of one saved --grids-of run, per profile, and
    how much slower than the fastest measured grid each profile's pick (what --grid auto takes) runs."""
    rows = json.loads(saved.read_text())["rows"]
    store, hidden = rows[0]["store"], rows[0]["hidden"]
    measured = {r["grid"]: steady_seconds(r) for r in rows}
    predicted = {name: plan_epochs(store, ranks(rows[0]["grid"]), hidden, p) for name, p in profiles.items()}
    print(f"{Path(store).name}: {len(rows)} grids of {ranks(rows[0]['grid'])} ranks, hidden {hidden}")
    print(f"{'grid':>6s} {'measured s':>10s}" + "".join(f" {name + ' s':>14s}" for name in predicted))
    for grid in sorted(measured, key=measured.__getitem__):
        print(f"{grid:>6s} {measured[grid]:10.3f}" + "".join(f" {p[grid]:14.3f}" for p in predicted.values()))
    fastest = min(measured.values())
    for name, p in predicted.items():
        pick = min(p, key=p.__getitem__)
        over = 100 * (measured[pick] / fastest - 1)
        print(f"{name}: picks {pick}, {over:.1f}% slower than the fastest measured")
    pick = auto_pick(store, ranks(rows[0]["grid"]), hidden)
    over = 100 * (measured[pick] / fastest - 1)
    print(f"--grid auto (this machine, its trial run now): picks {pick}, {over:.1f}% slower than the fastest")


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--scales", default="15,16,17,18,19", help="comma-separated R-MAT scales")
    parser.add_argument("--hiddens", default="32,128", help="comma-separated hidden widths")
    parser.add_argument(
        "--epochs", type=int, help="epochs per run (the first WARMUP are left out; default: --steady-seconds)"
    )
    parser.add_argument(
        "--steady-seconds", type=float, default=3.0, help="steady epoch time per run to aim for (default 3)"
    )
    parser.add_argument("--rounds", type=int, default=4, help="runs of every grid per case, taking turns")
    parser.add_argument(
        "--profile", default=str(RESULTS / "profile.json"), help="gtool plan --calibrate output"
    )
    parser.add_argument("--append", action="store_true", help="add the rounds to a case's saved ones")
    parser.add_argument("--report", action="store_true", help="print the table and fit of every saved case")
    parser.add_argument("--grids-of", type=int, help="measure every grid of P ranks on --store instead")
    parser.add_argument("--store", help="with --grids-of: the store")
    parser.add_argument("--hidden", type=int, default=128, help="with --grids-of: the hidden width")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.grids_of:
        saved = RESULTS / f"grids-{Path(args.store).stem}-{args.grids_of}.json"
        if not args.report:
            rows = grid_runs(args.store, args.grids_of, args.hidden, args.epochs or 8, args.rounds)
            saved.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
        grid_report(saved, {"shipped": "shipped", "this machine": None})
        return
    if args.report:
        report(sorted(RESULTS.glob("bench_plan-rmat*-h*.json")), args.profile)
        return
    for scale in (int(s) for s in args.scales.split(",")):
        build_store(
            store_path(scale),
            f"rmat:{scale}:8",
            ["--tiles", "16x16", "--num-features", "128", "--num-classes", "32"],
        )
        for hidden in (int(h) for h in args.hiddens.split(",")):
            epochs = args.epochs or case_epochs(scale, hidden, args.steady_seconds, args.profile)
            rows = run_case(scale, hidden, epochs, args.rounds)
            summary = RESULTS / f"bench_plan-rmat{scale}-h{hidden}.json"
            if args.append and summary.exists():
                saved = {r["grid"]: r["runs"] for r in json.loads(summary.read_text())["rows"]}
                rows = [{**r, "runs": saved.get(r["grid"], []) + r["runs"]} for r in rows]
            summary.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
