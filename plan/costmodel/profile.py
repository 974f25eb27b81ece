"""Device profiles: the measured costs `gtool plan` turns shapes, nonzeros and bytes into seconds with.

A profile is plain JSON, written by `gtool plan --calibrate` (gtool.plan.calibration.microbench) or by
the automatic calibration (gtool.plan.calibration.quick): SpMM, GEMM, element-wise, dropout and
allocation costs, all-reduce rows per group size (inside a node and, optionally, across nodes), and the
factors of k ranks side by side. Its keys and formulas: docs/plan.md, Profiles and Time. Every value is
checked when it is read. A profile made on one machine is read anywhere: it describes that machine.
"""

from __future__ import annotations

import fnmatch
import json
import math
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from gtool.errors import GtoolError
from gtool.store.writing.atomic import write_atomically

FORMAT = "gtool-plan-profile"
VERSION = 4
READABLE_VERSIONS = (2, 3, 4)
"""Version 2 had no inter-node rows, version 3 no cores (its ranks shared nothing)."""
DEFAULT_PROFILE = "default-profile.json"


class ProfileError(GtoolError):
    """A profile file that cannot be used."""


@dataclass(frozen=True)
class SpmmCost:
    widths: list[int]
    dense_bytes: list[float]
    seconds_per_nnz_col: list[list[float]]
    seconds_per_row_col: float
    seconds_per_call: float

    def seconds(self, nnz: np.ndarray, rows: int, cols: int, width: int, itemsize: int) -> np.ndarray:
        """Seconds of a CSR (rows x cols, `nnz` nonzeros; an array over ranks) times a dense cols x width."""
        if width == 0:
            return np.zeros_like(nnz, dtype=np.float64)
        a = _table(self.widths, self.dense_bytes, self.seconds_per_nnz_col, width, cols * width * itemsize)
        scale = itemsize / 4
        return scale * (nnz * width * a + rows * width * self.seconds_per_row_col) + self.seconds_per_call


@dataclass(frozen=True)
class GemmCost:
    seconds_per_flop: float
    seconds_per_byte: float
    seconds_per_call: float

    def seconds(self, m: int, k: int, n: int, itemsize: int) -> float:
        """Seconds of an (m x k) @ (k x n) product."""
        if m * k * n == 0:
            return 0.0
        flops, nbytes = 2 * m * k * n, (m * k + k * n + m * n) * itemsize
        return (
            flops * self.seconds_per_flop * itemsize / 4
            + nbytes * self.seconds_per_byte
            + self.seconds_per_call
        )


@dataclass(frozen=True)
class ElementwiseCost:
    seconds_per_byte: float
    seconds_per_call: float

    def seconds(self, nbytes: float, calls: int = 1) -> float:
        return nbytes * self.seconds_per_byte + calls * self.seconds_per_call


@dataclass(frozen=True)
class DropoutCost:
    seconds_per_element: float
    seconds_per_call: float

    def seconds(self, elements: float, calls: int) -> float:
        return elements * self.seconds_per_element + calls * self.seconds_per_call


@dataclass(frozen=True)
class AllocationCost:
    """Seconds per byte of a fresh tensor beyond writing it (the allocator's page faults), per size:
    allocators hand large blocks straight from the operating system, whose pages fault on first touch,
    and reuse small ones."""

    sizes: list[float]
    seconds_per_byte: list[float]

    def seconds(self, nbytes: float) -> float:
        """The extra seconds of allocating `nbytes`: the cost per byte of the largest size measured up
        to it (0 below the smallest size measured)."""
        measured = [i for i, size in enumerate(self.sizes) if size <= nbytes]
        return nbytes * self.seconds_per_byte[max(measured)] if measured else 0.0


@dataclass(frozen=True)
class CollectiveCost:
    """Seconds of a collective alone, and the CPU seconds each rank spends on it when ranks share the
    cores (0 where not measured: a device per rank, or a profile made before they were)."""

    latency: float
    seconds_per_byte: float
    cpu_latency: float = 0.0
    cpu_seconds_per_byte: float = 0.0


@dataclass(frozen=True)
class EpochFactors:
    """What real epochs of k ranks side by side cost beyond the microbenchmarks' model (k = 1 included:
    a trainer's operations are not the microbenchmarks' warm, isolated ones): SpMM, dense work and fresh
    tensors' page faults are `spmm`, `dense` and `allocation` times slower, every collective takes
    `collective_latency` seconds longer, and every layer `overhead_per_layer` seconds more."""

    spmm: float = 1.0
    dense: float = 1.0
    allocation: float = 1.0
    collective_latency: float = 0.0
    overhead_per_layer: float = 0.0


@dataclass(frozen=True)
class DeviceProfile:
    """What one rank's device and its collectives cost (see the module docstring for the formulas)."""

    device: str
    backend: str
    threads: int
    spmm: SpmmCost
    gemm: GemmCost
    elementwise: ElementwiseCost
    dropout: DropoutCost
    allocation: AllocationCost
    collectives: dict[int, CollectiveCost]
    epochs: dict[int, EpochFactors] = field(default_factory=dict)
    made_on: dict[str, Any] = field(default_factory=dict)
    inter_node_collectives: dict[int, CollectiveCost] = field(default_factory=dict)
    cores: int = 0
    """The cores the ranks of one node share, `threads` each (a CPU profile); 0: every rank computes on
    a device of its own (a GPU) and ranks share nothing."""

    def collective(self, group_size: int, inter_node: bool = False) -> CollectiveCost:
        """The cost of collectives in groups of `group_size` ranks (nearest size measured), inside one
        node or, with `inter_node`, across nodes (the intra-node rows when the profile has none)."""
        rows = self.inter_node_collectives if inter_node and self.inter_node_collectives else self.collectives
        if not rows:
            raise ProfileError("the profile has no collective measurements (it was made with one device)")
        nearest = min(rows, key=lambda g: (abs(np.log(g / group_size)), -g))
        return rows[nearest]

    def sharing(self, ranks: int) -> float:
        """How many times longer the CPU work of `ranks` ranks of one node takes when they all work at
        once than on a core each: max(1, ranks threads / cores) (1 without cores)."""
        return max(1.0, ranks * self.threads / self.cores) if self.cores else 1.0

    def epoch_factors(self, ranks_per_node: int) -> EpochFactors:
        """The real-epoch factors of `ranks_per_node` ranks side by side (the largest k measured up to
        it; none measured: the microbenchmarks' model as it is)."""
        measured = [k for k in self.epochs if k <= ranks_per_node]
        return self.epochs[max(measured)] if measured else EpochFactors()

    def collective_seconds(
        self, wire_bytes: float, group_size: int, inter_node: bool = False, ranks_per_node: int = 1
    ) -> float:
        """Seconds of a collective moving `wire_bytes` per rank while all `ranks_per_node` ranks of the
        node run one (every group along an axis runs it at once): its time alone, or when they
        share the cores, their CPU work shared over the cores if that takes longer."""
        cost = self.collective(group_size, inter_node)
        alone = cost.latency + wire_bytes * cost.seconds_per_byte
        work = cost.cpu_latency + wire_bytes * cost.cpu_seconds_per_byte
        return max(alone, self.sharing(ranks_per_node) * work)

    def to_json(self) -> dict[str, Any]:
        content = asdict(self)
        for name in ("collectives", "inter_node_collectives"):
            content[name] = {str(g): asdict(c) for g, c in sorted(getattr(self, name).items())}
        content["epochs"] = {str(k): asdict(f) for k, f in sorted(self.epochs.items())}
        return {"format": FORMAT, "version": VERSION, **content}

    def describe(self) -> str:
        made = self.made_on
        when = f" on {made['date']}" if "date" in made else ""
        if self.inter_node_collectives:
            inter = f"inter-node rows {made.get('inter_node', 'given')}"
        else:
            inter = "no inter-node rows (the intra-node ones price every group)"
        return (
            f"{self.device}/{self.backend}, {self.threads} thread(s), made on {made.get('host', '?')}{when}; "
            f"{inter}"
        )


def _table(
    widths: list[int], sizes: list[float], values: list[list[float]], width: int, size: float
) -> float:
    """values[w][s] interpolated in log width and log size (clamped at the ends)."""
    log_sizes = np.log(sizes)
    per_width = [np.interp(np.log(max(size, 1.0)), log_sizes, row) for row in values]
    return float(np.interp(np.log(width), np.log(widths), per_width))


def _collective_rows(rows: dict[str, Any]) -> dict[int, CollectiveCost]:
    return {int(g): CollectiveCost(**c) for g, c in rows.items()}


POSITIVE = (
    "epochs.*.spmm",
    "epochs.*.dense",
    "epochs.*.allocation",
    "spmm.widths.*",
    "spmm.dense_bytes.*",
    "allocation.sizes.*",
)
"""Keys whose value must be above 0 (a factor on the modelled work, a table's axis); every other number
is a cost, finite and >= 0 (a fit may find a part of a cost to be 0)."""
PRICED = (
    "spmm",
    "gemm",
    "elementwise",
    "dropout",
    "allocation",
    "collectives",
    "inter_node_collectives",
    "epochs",
)
"""The parts of a profile that hold costs."""


AXES = ("spmm.widths", "spmm.dense_bytes", "allocation.sizes")
"""The sizes costs are tabled at: interpolation needs them increasing."""
COUNTED = ("collectives", "inter_node_collectives", "epochs")
"""Parts keyed by a number of ranks."""
FIELDS: dict[str, type] = {
    "spmm": SpmmCost,
    "gemm": GemmCost,
    "elementwise": ElementwiseCost,
    "dropout": DropoutCost,
    "allocation": AllocationCost,
    "collectives": CollectiveCost,
    "inter_node_collectives": CollectiveCost,
    "epochs": EpochFactors,
}
"""The costs each part holds (for the counted parts: each rank count's)."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _leaves(value: Any, key: str) -> list[tuple[str, Any]]:
    """Every value under `value` that is not an object or a list, with its dotted key."""
    if isinstance(value, dict):
        return [n for k, v in value.items() for n in _leaves(v, f"{key}.{k}")]
    if isinstance(value, list):
        return [n for i, v in enumerate(value) for n in _leaves(v, f"{key}.{i}")]
    return [(key, value)]


def _check_values(content: dict[str, Any], where: str) -> None:
    """Refuse a cost that would make predictions meaningless: not a number, NaN, infinite, negative, or 0
    where a cost per unit of work is expected."""
    for part in PRICED:
        for key, value in _leaves(content.get(part, {}), part):
            positive = any(fnmatch.fnmatchcase(key, pattern) for pattern in POSITIVE)
            expected = "a number > 0" if positive else "a finite number >= 0"
            if not _is_number(value) or not math.isfinite(value) or value < 0 or (positive and value == 0):
                raise ProfileError(f"{where}: {key} is {value!r}, expected {expected}")


def _costs_problem(key: str, costs: Any, cost: type) -> str | None:
    """What is wrong with the costs under `key` (an object of `cost`'s fields: numbers, or lists where
    the field is one), None when nothing."""
    if not isinstance(costs, dict):
        return f"{key} is {costs!r}, expected an object"
    for name, kind in cost.__annotations__.items():
        listed = kind.startswith("list")
        if name in costs and isinstance(costs[name], list) != listed:
            return f"{key}.{name} is {costs[name]!r}, expected {'a list' if listed else 'a number'}"
    return None


def _part_problem(part: str, section: Any) -> str | None:
    """What is wrong with a priced part's layout (its costs, its keys of rank counts), None when nothing."""
    if part not in COUNTED:
        return _costs_problem(part, section, FIELDS[part])
    if not isinstance(section, dict):
        return f"{part} is {section!r}, expected an object"
    for count, costs in section.items():
        if not count.isdigit() or int(count) < 1:
            return f"{part} has the key {count!r}, expected numbers of ranks (whole numbers >= 1) as keys"
        if problem := _costs_problem(f"{part}.{count}", costs, FIELDS[part]):
            return problem
    return None


def _layout_problem(content: dict[str, Any]) -> str | None:
    """What is wrong with the profile's layout (the key and what was expected), None when nothing: a
    thread and core count, rank counts as keys, numbers and lists where the costs have them, increasing
    axes."""
    for name, value, least in (("threads", content.get("threads"), 1), ("cores", content.get("cores", 0), 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            return f"{name} is {value!r}, expected a whole number >= {least}"
    for part in FIELDS:
        if part in content and (problem := _part_problem(part, content[part])):
            return problem
    for axis in AXES:
        part, name = axis.split(".")
        values = content.get(part, {}).get(name, [])
        for i in range(1, len(values)):
            if values[i] <= values[i - 1]:
                return f"{axis}.{i} is {values[i]!r} after {values[i - 1]!r}, expected sizes that increase"
    allocation = content.get("allocation", {})
    if len(allocation.get("seconds_per_byte", [])) != len(allocation.get("sizes", [])):
        return "allocation.seconds_per_byte must hold one value per size in allocation.sizes"
    return None


def profile_from_json(content: dict[str, Any], where: str) -> DeviceProfile:
    """A profile from its JSON content; errors name `where` and the missing or bad part."""
    if content.get("format") != FORMAT:
        raise ProfileError(f"{where}: not a gtool plan profile (format {content.get('format')!r})")
    if content.get("version") not in READABLE_VERSIONS:
        *earlier, last = map(str, READABLE_VERSIONS)
        readable = f"{', '.join(earlier)} and {last}"
        raise ProfileError(
            f"{where}: profile version {content.get('version')!r}, this gtool reads {readable}"
        )
    _check_values(content, where)
    if problem := _layout_problem(content):
        raise ProfileError(f"{where}: {problem}")
    try:
        spmm = SpmmCost(**content["spmm"])
        if np.shape(spmm.seconds_per_nnz_col) != (len(spmm.widths), len(spmm.dense_bytes)):
            raise ProfileError(f"{where}: spmm.seconds_per_nnz_col must be widths x dense_bytes")
        return DeviceProfile(
            device=content["device"],
            backend=content["backend"],
            threads=int(content["threads"]),
            spmm=spmm,
            gemm=GemmCost(**content["gemm"]),
            elementwise=ElementwiseCost(**content["elementwise"]),
            dropout=DropoutCost(**content["dropout"]),
            allocation=AllocationCost(**content["allocation"]),
            collectives=_collective_rows(content["collectives"]),
            epochs={int(k): EpochFactors(**f) for k, f in content["epochs"].items()},
            made_on=dict(content.get("made_on", {})),
            inter_node_collectives=_collective_rows(content.get("inter_node_collectives", {})),
            cores=content.get("cores", 0),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ProfileError(f"{where}: malformed profile ({type(exc).__name__}: {exc})") from None


def load_profile(path: str | None) -> tuple[DeviceProfile, str]:
    """The profile at `path`, or the one shipped with gtool; with a line saying which was used."""
    if path is None:
        text = resources.files("gtool.plan.costmodel").joinpath(DEFAULT_PROFILE).read_text()
        profile = profile_from_json(json.loads(text), f"gtool's {DEFAULT_PROFILE}")
        note = (
            f"no --profile: using gtool's shipped profile ({profile.describe()}); times are only indicative "
            "for other machines: run `gtool plan --calibrate -o profile.json` on yours"
        )
        return profile, note
    try:
        content = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ProfileError(
            f"{path}: no such profile (make one with `gtool plan --calibrate -o {path}`)"
        ) from None
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{path}: not JSON ({exc})") from None
    except IsADirectoryError:
        raise ProfileError(
            f"{path}: a folder; expected a profile JSON file (gtool plan --calibrate -o FILE)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    profile = profile_from_json(content, path)
    return profile, f"profile {path} ({profile.describe()})"


def save_profile(profile: DeviceProfile, path: str | Path, measurements: dict | None = None) -> None:
    """Write the profile, with the `measurements` it was fitted to when given, whole or not at all: ranks
    and other runs may read it at any time, and an interrupted write must not leave half a file."""
    content = profile.to_json() | ({} if measurements is None else {"measurements": measurements})
    write_atomically(str(path), lambda out: out.write(json.dumps(content, indent=1).encode() + b"\n"))
