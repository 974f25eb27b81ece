"""This machine's memory as a process sees it: psutil's figures bounded by the process's cgroup limit.

A container or a job scheduler caps a process tree's memory, page cache included, with a cgroup (v1: the
`memory` controller's memory.limit_in_bytes; v2: memory.max) at its own level or one above it; the
smallest limit on the way to the root binds. Available memory under a limit is the limit less the
usage that reclaiming cannot free (the usage less inactive page cache: the kubelet's working set).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import psutil

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")
NO_LIMIT = 1 << 60
"""A limit this large is none (cgroup v1 writes 'no limit' as the largest page-aligned int64)."""
RANK_BASE_BYTES = 300 << 20
"""Memory of a spawned rank before it loads anything (Python, torch, zarr: about 380 MB RSS measured)."""


class Memory(NamedTuple):
    """Bytes of memory in all, and available now."""

    total: int
    available: int


def machine_memory(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> Memory:
    """This machine's memory (psutil's), bounded by the tightest cgroup limit above this process."""
    vm = psutil.virtual_memory()
    total, available = vm.total, vm.available
    for limit, working_set in cgroup_levels(root, proc_cgroup):
        total = min(total, limit)
        available = min(available, max(0, limit - working_set))
    return Memory(total, available)


def cgroup_levels(root: Path, proc_cgroup: Path) -> Iterator[tuple[int, int]]:
    """(limit, working set) of every level with a memory limit, from this process's cgroup up to the
    root: the v1 memory controller's hierarchy when the process has one, else the v2 unified one."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return
    entries = [line.split(":", 2) for line in lines if line.count(":") >= 2]
    v1 = [path for _, controllers, path in entries if "memory" in controllers.split(",")]
    v2 = [path for number, controllers, path in entries if number == "0" and not controllers]
    if v1:
        folders, names = _upwards(root / "memory", v1[0]), ("memory.limit_in_bytes", "memory.usage_in_bytes")
    elif v2:
        folders, names = _upwards(root, v2[0]), ("memory.max", "memory.current")
    else:
        return
    for folder in folders:
        limit, usage = _number(folder / names[0]), _number(folder / names[1])
        if limit is not None and limit < NO_LIMIT:
            yield limit, max(0, (usage or 0) - _inactive_file(folder))


def _upwards(mount: Path, path: str) -> Iterator[Path]:
    """The folders of `path` under `mount` and of each of its parents, the mount's own last (a folder a
    container does not show, its host's path, is skipped: the container's own is the mount)."""
    parts = [p for p in path.split("/") if p]
    for depth in range(len(parts), -1, -1):
        folder = mount.joinpath(*parts[:depth])
        if folder.is_dir():
            yield folder


def _number(file: Path) -> int | None:
    """The integer a cgroup file holds; None when absent, unreadable or 'max' (no limit)."""
    try:
        text = file.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _inactive_file(folder: Path) -> int:
    """Inactive page cache of a cgroup (memory.stat's total_inactive_file in v1, inactive_file in v2)."""
    try:
        lines = (folder / "memory.stat").read_text().splitlines()
    except OSError:
        return 0
    stat = dict(line.split(" ", 1) for line in lines if " " in line)
    value = stat.get("total_inactive_file", stat.get("inactive_file", "0")).strip()
    return int(value) if value.isdigit() else 0
