"""What a run's tasks need on a Dask worker, imported once before the worker's first task.

A fresh worker unpickles a task (importing the modules its function and arguments name) on its event loop
while another task may be importing on a task thread; zarr's modules, imported from two threads at once,
can meet half initialized (`ImportError: cannot import name 'StorePath' from partially initialized
module`), and the worker dies for good. A worker plugin imports them all on the event loop, before the
scheduler gives the worker a task: on every worker there when it is registered, and on every worker that
joins later.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Iterable
from typing import Any

from distributed import WorkerPlugin

from gtool.errors import GtoolError

TASK_MODULES = (
    "zarr",
    "gtool.preprocess.edges.mapper",
    "gtool.preprocess.edges.reducer",
    "gtool.preprocess.nodes.node_writer",
    "gtool.preprocess.nodes.feature_shuffle",
    "gtool.preprocess.engine.iostats",
    "gtool.preprocess.sources.nodes.generated",
)
"""The modules of every stage's task functions (each imports what its arguments are made of)."""
KERNEL_MODULES = tuple(
    f"gtool.preprocess.kernels.compiled.{name}" for name in ("shuffle", "tiles", "randomfeatures", "rmat")
)
"""numba's kernels' modules (the tasks import them on their threads, several at once on a worker of
several threads)."""


class Preload(WorkerPlugin):
    """Imports `modules` on a worker once, as it is added (see the module's docstring). Registered
    idempotently under a name made of the module list: a cluster that has it already is not asked again."""

    idempotent = True

    def __init__(self, modules: Iterable[str]):
        self.modules = tuple(dict.fromkeys(modules))
        self.name = "gtool-preload-" + hashlib.sha1(" ".join(self.modules).encode()).hexdigest()[:12]

    def setup(self, worker: Any) -> None:
        for module in self.modules:
            importlib.import_module(module)


def run_modules(*objects: Any) -> list[str]:
    """The task modules, those of the classes of `objects` (the source, the features: their chunks'
    classes live beside them), and the kernels'."""
    own = [type(obj).__module__ for obj in objects if obj is not None]
    return [*TASK_MODULES, *own, *KERNEL_MODULES]


def preload(client: Any, modules: list[str]) -> None:
    """Register the Preload of `modules` on `client`'s cluster; a worker that cannot import them (gtool
    missing or another version there) is one error line."""
    plugin = Preload(modules)
    try:
        client.register_plugin(plugin, name=plugin.name)
    except Exception as exc:  # noqa: BLE001 - whatever the worker raised importing gtool's modules
        raise GtoolError(
            f"the Dask workers could not import gtool's modules ({type(exc).__name__}: {exc}): install "
            "gtool, the same version as here, in every worker's Python environment"
        ) from None
