"""Where an OGB node-property dataset lives and what it is: OGB's on-disk layout and master.csv.

A dataset folder (ROOT/ogbn_arxiv, as ogb's NodePropPredDataset lays it out, or one written by
ogb.io.DatasetSaver) holds raw/ in one of two forms, binary (raw/data.npz, raw/node-label.npz) or CSV
(raw/edge.csv.gz, raw/num-node-list.csv.gz, raw/num-edge-list.csv.gz, raw/node-feat.csv.gz,
raw/node-label.csv.gz), and split/<split name>/{train,valid,test}.csv.gz (or split_dict.pt).
Every dataset of master.csv is known by name; those gtool does not shard (heterogeneous ones such as
ogbn-mag, multi-task ones that are not binary) are refused with the reason (OgbInfo.refusal).
"""

from __future__ import annotations

import csv
import functools
import importlib.util
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gtool.errors import InputError
from gtool.preprocess.sources.npzmember import NpzMember
from gtool.preprocess.sources.ogb.csvfiles import count_columns
from gtool.preprocess.sources.ogb.pt import load_pt
from gtool.store import layout

GRAPH_FILES = {
    True: ("raw/data.npz",),
    False: ("raw/edge.csv.gz", "raw/num-node-list.csv.gz", "raw/num-edge-list.csv.gz"),
}
FEATURE_FILE = {True: None, False: "raw/node-feat.csv.gz"}
"""The node feature file of each raw form (the binary form keeps them in data.npz)."""
FORMS = " or ".join(", ".join(files) for files in GRAPH_FILES.values())
HETERO_FILES = ("raw/edge_index_dict.npz", "raw/triplet-type-list.csv.gz")
SPLIT_FILES = tuple(f"{name}.csv.gz" for name in layout.SPLIT_CODES)
SPLIT_PT = "split_dict.pt"
CLASSIFICATION_TASKS = ("multiclass classification", "binary classification")
BINARY_TASKS = "binary classification"
"""The task type of multi-label datasets: K binary tasks per node (ogbn-proteins)."""
LABEL_FILES = {True: ("raw/node-label.npz", "node_label"), False: ("raw/node-label.csv.gz", None)}


@dataclass(frozen=True)
class OgbInfo:
    """What master.csv (or a DatasetSaver meta_dict.pt, or the files) say about a dataset."""

    name: str
    binary: bool
    split: str | None
    num_classes: int | None
    directed: bool
    url: str | None = None
    download_name: str | None = None
    num_tasks: int = 1
    task_type: str = "multiclass classification"
    hetero: bool = False
    node_features: bool = True
    """Whether the dataset has node features (master.csv's has_node_attr)."""

    @property
    def dir_name(self) -> str:
        """The folder ogb keeps the dataset in under ROOT (ogbn-arxiv -> ogbn_arxiv)."""
        return self.name.replace("-", "_")

    def refusal(self) -> str | None:
        """Why gtool does not shard this dataset, or None when it does."""
        if self.hetero:
            return (
                "it is a heterogeneous graph (several node and edge types, each with its own ids); "
                "gtool shards homogeneous graphs (one node type, one edge type) only"
            )
        if self.num_tasks > 1 and self.task_type != BINARY_TASKS:
            return (
                f"it has {self.num_tasks} {self.task_type} tasks per node; gtool stores one class per node, "
                f"or K {BINARY_TASKS} tasks (multi-label)"
            )
        if self.task_type not in CLASSIFICATION_TASKS:
            return f"its task is {self.task_type}; gtool trains node classification only"
        return None

    def check_supported(self, where: str, keep_direction: bool = False) -> None:
        """Fail with the reason when gtool does not shard this dataset, or not with `keep_direction`
        (--directed) an undirected one: OGB stores each of its edges once and adds the inverse when
        loading it, so keeping the stored direction would drop one of the two of every edge."""
        reason = self.refusal()
        if reason is not None:
            raise InputError(where, f"not supported: {reason}")
        if keep_direction and not self.directed:
            raise InputError(
                where,
                "--directed keeps each edge's direction, but this dataset is undirected: OGB stores each "
                "edge once and adds its inverse when loading it, so its edges have no direction to keep "
                "(--directed would drop half of every edge); shard it without --directed",
            )


def master_csv() -> Path:
    """ogb's nodeproppred/master.csv, found without importing ogb (whose import checks PyPI)."""
    spec = importlib.util.find_spec("ogb")
    if spec is None or not spec.submodule_search_locations:
        raise InputError("ogb", "the ogb package is not installed (pip install ogb)")
    return Path(next(iter(spec.submodule_search_locations))) / "nodeproppred" / "master.csv"


@functools.cache
def master_rows() -> dict[str, list[str]]:
    """master.csv as {field: values per dataset}; the field "" lists the dataset names."""
    with open(master_csv(), newline="") as f:
        return {row[0]: row[1:] for row in csv.reader(f)}


def master_info(name: str) -> OgbInfo:
    """The master.csv facts of OGB dataset `name` (e.g. ogbn-papers100M)."""
    rows = master_rows()
    column = rows[""].index(name)
    entry = {key: values[column] for key, values in rows.items()}
    return OgbInfo(
        name=name,
        binary=entry["binary"] == "True",
        split=entry["split"],
        num_classes=int(entry["num classes"]),
        directed=entry["add_inverse_edge"] != "True",
        url=entry["url"],
        download_name=entry["download_name"],
        num_tasks=int(entry["num tasks"]),
        task_type=entry["task type"],
        hetero=entry["is hetero"] == "True",
        node_features=entry["has_node_attr"] == "True",
    )


def short_name(name: str) -> str:
    """A dataset name without the ogbn- prefix, in lower case (ogbn-papers100M -> papers100m)."""
    return name.lower().replace("_", "-").removeprefix("ogbn-")


def known_dataset(spec: str) -> OgbInfo | None:
    """The OGB dataset of master.csv that `spec` names (ogbn-papers100M, papers100M, papers100m,
    ogbn_papers100m: any case, with or without the ogbn- prefix), or None."""
    key = short_name(spec.strip())
    name = next((name for name in master_rows()[""] if short_name(name) == key), None)
    return master_info(name) if name is not None else None


def known_folder(name: str) -> OgbInfo | None:
    """The master.csv dataset kept in a folder called `name` (ogbn_arxiv, or arxiv as unzipped; any case),
    or None."""
    infos = (master_info(full) for full in master_rows()[""])
    key = short_name(name)
    return next(
        (info for info in infos if key in {short_name(n) for n in (info.dir_name, info.download_name) if n}),
        None,
    )


def dataset_names() -> str:
    """The names of master.csv's datasets, for error messages."""
    return ", ".join(f"{name} ({short_name(name)})" for name in master_rows()[""])


@dataclass(frozen=True)
class OgbLayout:
    """A dataset folder and what is known about the dataset in it."""

    directory: Path
    info: OgbInfo

    @property
    def raw(self) -> Path:
        """The raw/ folder."""
        return self.directory / "raw"

    @property
    def split_dir(self) -> Path | None:
        """split/<split name>/, or None when the dataset has no split."""
        return self.directory / "split" / self.info.split if self.info.split else None

    def split_files(self) -> tuple[str, ...]:
        """The split files as paths relative to the dataset folder."""
        return tuple(f"split/{self.info.split}/{name}" for name in SPLIT_FILES) if self.info.split else ()

    def node_files(self) -> tuple[str, ...]:
        """The raw files of node labels and (CSV form, where the dataset has them) node features."""
        features = FEATURE_FILE[self.info.binary]
        listed = (features,) if features is not None and self.info.node_features else ()
        return listed + (LABEL_FILES[self.info.binary][0],)

    def required(self, with_nodes: bool) -> tuple[str, ...]:
        """Relative paths the dataset needs: the graph, and labels, features and split if `with_nodes`."""
        nodes = self.node_files() + self.split_files() if with_nodes else ()
        return GRAPH_FILES[self.info.binary] + nodes

    def missing(self, with_nodes: bool) -> list[str]:
        """Required files that are not there (split_dict.pt stands in for the split's .csv.gz files)."""
        has_pt = self.split_dir is not None and (self.split_dir / SPLIT_PT).is_file()
        return [
            rel
            for rel in self.required(with_nodes)
            if not (self.directory / rel).is_file() and not (has_pt and rel in self.split_files())
        ]

    def how_to_get(self, root: str) -> str:
        """What to put where (and what to download) to make the dataset complete under `root`."""
        prefix = self.info.dir_name
        files = [f"{prefix}/{rel}" for rel in GRAPH_FILES[self.info.binary] + self.node_files()]
        split = f"{prefix}/split/{self.info.split}/{{train,valid,test}}.csv.gz"
        text = f"put {', '.join(files)} and {split} under {root}"
        if self.info.url:
            text += (
                f", or download {self.info.url} and unzip it into {root}, renaming its"
                f" {self.info.download_name}/ folder to {prefix}/"
            )
        return text

    def files(self) -> list[Path]:
        """Every file of the dataset's raw/ and split folders (for describe())."""
        folders = [self.raw] + ([self.split_dir] if self.split_dir is not None else [])
        return sorted(p for folder in folders if folder.is_dir() for p in folder.iterdir() if p.is_file())


def dataset_folder(path: Path) -> Path:
    """`path` if it holds raw/, else its only subfolder that does (a DatasetSaver submission folder)."""
    if (path / "raw").is_dir():
        return path
    inner = sorted(p for p in path.iterdir() if (p / "raw").is_dir()) if path.is_dir() else []
    if len(inner) == 1:
        return inner[0]
    if inner:
        names = ", ".join(p.name for p in inner)
        raise InputError(str(path), f"holds several OGB datasets ({names}); pass one of them")
    raise InputError(str(path), f"not an OGB dataset folder: missing raw/ (expected {FORMS})")


def saved_meta(folder: Path) -> dict[str, Any]:
    """DatasetSaver's meta_dict.pt (next to or above the dataset folder) if it is a plain dict, else {}."""
    for candidate in (folder / "meta_dict.pt", folder.parent / "meta_dict.pt"):
        if candidate.is_file():
            try:
                meta = load_pt(str(candidate))
            except InputError:
                return {}
            builtins = (str, int, float, bool)
            plain = isinstance(meta, dict) and all(isinstance(v, builtins) for v in meta.values())
            return meta if plain else {}
    return {}


def only_split(folder: Path, preferred: str | None) -> str | None:
    """The split to use: `preferred` if present, else the only folder under split/ (None if none)."""
    split_root = folder / "split"
    names = sorted(p.name for p in split_root.iterdir() if p.is_dir()) if split_root.is_dir() else []
    if preferred in names:
        return preferred
    if len(names) > 1:
        raise InputError(str(split_root), f"holds several splits ({', '.join(names)}); expected one")
    return names[0] if names else None


def label_columns(folder: Path, binary: bool) -> int:
    """Labels per node (tasks) in the folder's node-label file, 1 when it has none."""
    name, key = LABEL_FILES[binary]
    path = folder / name
    if not path.is_file():
        return 1
    if key is None:
        return count_columns(str(path))
    shape = NpzMember(str(path), key).shape
    return shape[1] if len(shape) == 2 else 1


def inferred_info(folder: Path) -> OgbInfo:
    """What an OGB folder not named in master.csv is, from DatasetSaver's meta_dict.pt and its files."""
    meta = saved_meta(folder)
    hetero = meta.get("is hetero") == "True" or any((folder / rel).is_file() for rel in HETERO_FILES)
    forms = [binary for binary, files in GRAPH_FILES.items() if (folder / files[0]).is_file()]
    if not forms and not hetero:
        raise InputError(str(folder), f"not an OGB dataset folder: expected {FORMS}")
    binary = bool(forms) and forms[0]
    classes, tasks, task_type = meta.get("num classes"), meta.get("num tasks"), meta.get("task type")
    if not isinstance(tasks, int) or hetero:
        tasks = label_columns(folder, binary)
    if not isinstance(task_type, str):
        task_type = BINARY_TASKS if tasks > 1 else "multiclass classification"
    return OgbInfo(
        name=folder.name,
        binary=binary,
        split=only_split(folder, meta.get("split")),
        num_classes=classes if isinstance(classes, int) and classes > 1 else None,
        directed=meta.get("add_inverse_edge") != "True",
        num_tasks=tasks,
        task_type=task_type,
        hetero=hetero,
        node_features=meta.get("has_node_attr") != "False",
    )


def form_found(folder: Path, info: OgbInfo) -> OgbInfo:
    """`info` in the raw form the folder holds: a master.csv dataset saved again by ogb.io.DatasetSaver
    (binary) where OGB ships it as CSV, or the other way round."""
    other = not info.binary
    if not (folder / GRAPH_FILES[info.binary][0]).is_file() and (folder / GRAPH_FILES[other][0]).is_file():
        return replace(info, binary=other)
    return info


def layout_of_directory(path: str, keep_direction: bool = False) -> OgbLayout:
    """The dataset in folder `path` (OGB layout, or a DatasetSaver submission), checked for its files and
    against `keep_direction` (--directed)."""
    folder = dataset_folder(Path(path))
    known = known_folder(folder.name)
    found = OgbLayout(folder, form_found(folder, known) if known else inferred_info(folder))
    found.info.check_supported(str(folder), keep_direction)
    missing = found.missing(with_nodes=known is not None)
    if missing:
        raise InputError(str(folder), f"incomplete OGB dataset: missing {', '.join(missing)}")
    return found
