"""Plan benchmark: `gtool plan`'s predicted epoch time against `gtool train`'s measured one, grid by grid.

    python -m bench.bench_plan --scales 15,16 --hiddens 32,128                # runs, saved per scale
    python -m gtool.cli plan --calibrate -o bench/results/plan/profile.json     # on an idle machine
    python -m bench.bench_plan --report                                       # the table and the fit

Stores: rmat:SCALE:8 (16x16 tiles, 128 features, 32 classes) built once into bench/results/plan/. Every
run is `gtool train STORE --grid G --hidden H` with the default model otherwise (3 layers, dropout 0.5),
one torch thread per rank, --epochs E; the measured figure is the mean epoch time after the first
(warm-up), from its --log. The prediction is gtool.plan's for the same store, grid, model and profile.
`--report` gathers every saved run, predicts it afresh with --profile, and prints R^2 of measured
against predicted (1 - SS_res / SS_tot around the identity line, and the squared correlation), and per
(scale, hidden) whether the grid predicted fastest is the measured fastest or within 5% of it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench.common import REPO, build_store
from bench.common import RESULTS as BENCH_RESULTS

RESULTS = BENCH_RESULTS / "plan"
GRIDS = ("1x1x1", "2x1x1", "1x2x1", "1x1x2")
WITHIN = 0.05
PHASES = ("seconds", "spmm", "dense", "comm")


def store_path(scale: int) -> Path:
    return RESULTS / f"rmat-{scale}-8.zarr"


def predicted_seconds(store: str, grid: str, hidden: int, profile: str) -> dict:
    """gtool.plan's epoch time for one grid (and its split)."""
    from gtool.grid import ProcessGrid, layer_widths
    from gtool.plan.bandnnz import ShardNnzTable
    from gtool.plan.planner import PlanRequest, estimate_grid
    from gtool.plan.profile import load_profile
    from gtool.store import open_store

    opened = open_store(store)
    dims = ProcessGrid(*map(int, grid.split("x")))
    request = PlanRequest(dims.size, hidden=hidden)
    widths = layer_widths(opened.num_features, hidden, opened.num_classes, request.layers)
    table = ShardNnzTable(opened, set(dims.dims))
    estimate = estimate_grid(dims, table, widths, request, load_profile(profile)[0], opened.num_classes)
    summary = estimate.summary()
    keys = ("epoch_seconds", "spmm_seconds", "dense_seconds", "comm_seconds", "overhead_seconds")
    return {key: summary[key] for key in keys}


def measured_seconds(store: str, grid: str, hidden: int, epochs: int) -> dict:
    """`gtool train` on `grid`: mean epoch and phase times after the first epoch, from its --log."""
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "log.jsonl"
        command = [sys.executable, "-m", "gtool.cli", "train", store, "--grid", grid, "--hidden", str(hidden)]
        command += ["--epochs", str(epochs), "--eval-every", str(epochs), "--threads", "1", "--log", str(log)]
        subprocess.run(command, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
        records = [json.loads(line) for line in log.read_text().splitlines() if '"summary"' not in line]
    steady = records[1:] if len(records) > 1 else records
    means = {name: statistics.mean(r[name] for r in steady) for name in PHASES}
    return {**means, "epochs": [{name: r[name] for name in PHASES} for r in records]}


def run_scale(scale: int, hiddens: list[int], epochs: int) -> list[dict]:
    store = store_path(scale)
    build_store(
        store, f"rmat:{scale}:8", ["--tiles", "16x16", "--num-features", "128", "--num-classes", "32"]
    )
    rows = []
    for hidden in hiddens:
        for grid in GRIDS:
            measured = measured_seconds(str(store), grid, hidden, epochs)
            rows.append({"scale": scale, "hidden": hidden, "grid": grid, "measured": measured})
            print(
                f"rmat:{scale}:8 hidden {hidden:3d} {grid}: measured {measured['seconds']:.3f} s", flush=True
            )
    return rows


def r_squared(measured: np.ndarray, predicted: np.ndarray) -> tuple[float, float]:
    """(1 - SS_res / SS_tot with predictions taken as they are, squared Pearson correlation)."""
    residual = float(((measured - predicted) ** 2).sum())
    total = float(((measured - measured.mean()) ** 2).sum())
    return 1 - residual / total, float(np.corrcoef(measured, predicted)[0, 1] ** 2)


def report(files: list[Path], profile: str) -> None:
    """The table and fit of every saved run, predictions made afresh with `profile`."""
    rows = [row for f in files for row in json.loads(f.read_text())["rows"]]
    for r in rows:
        r["predicted"] = predicted_seconds(str(store_path(r["scale"])), r["grid"], r["hidden"], profile)
    print(f"{'store':12s} {'hidden':>6s} {'grid':>6s} {'measured s':>10s} {'predicted s':>11s} {'ratio':>6s}")
    for r in rows:
        m, p = r["measured"]["seconds"], r["predicted"]["epoch_seconds"]
        print(f"rmat:{r['scale']}:8  {r['hidden']:6d} {r['grid']:>6s} {m:10.3f} {p:11.3f} {p / m:6.2f}")
    measured = np.array([r["measured"]["seconds"] for r in rows])
    predicted = np.array([r["predicted"]["epoch_seconds"] for r in rows])
    identity, correlation = r_squared(measured, predicted)
    log_identity, _ = r_squared(np.log(measured), np.log(predicted))
    print(
        f"\n{len(rows)} runs: R^2 {identity:.3f} (identity line), {correlation:.3f} (squared correlation), "
        f"{log_identity:.3f} (identity, log times)"
    )
    cases: dict[tuple, list[dict]] = {}
    for r in rows:
        cases.setdefault((r["scale"], r["hidden"]), []).append(r)
    hits = 0
    print(
        f"\n{'store':12s} {'hidden':>6s} {'predicted best':>14s} {'measured best':>13s} {'its excess':>10s}"
    )
    for (scale, hidden), case in sorted(cases.items()):
        chosen = min(case, key=lambda r: r["predicted"]["epoch_seconds"])
        fastest = min(case, key=lambda r: r["measured"]["seconds"])
        excess = chosen["measured"]["seconds"] / fastest["measured"]["seconds"] - 1
        hits += excess <= WITHIN
        print(
            f"rmat:{scale}:8  {hidden:6d} {chosen['grid']:>14s} {fastest['grid']:>13s} {100 * excess:9.1f}%"
        )
    print(f"predicted best is the measured best or within {100 * WITHIN:.0f}%: {hits} of {len(cases)} cases")


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--scales", default="15,16,17,18,19", help="comma-separated R-MAT scales")
    parser.add_argument("--hiddens", default="32,128", help="comma-separated hidden widths")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument(
        "--profile", default=str(RESULTS / "profile.json"), help="gtool plan --calibrate output"
    )
    parser.add_argument("--report", action="store_true", help="print the table and fit of every saved run")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.report:
        report(sorted(RESULTS.glob("bench_plan-rmat*.json")), args.profile)
        return
    hiddens = [int(h) for h in args.hiddens.split(",")]
    for scale in (int(s) for s in args.scales.split(",")):
        rows = run_scale(scale, hiddens, args.epochs)
        summary = RESULTS / f"bench_plan-rmat{scale}.json"
        summary.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
