"""This machine's memory under a cgroup limit: fake v1 and v2 hierarchies in a temporary folder."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from gtool.memory import NO_LIMIT, machine_memory

GB = 1 << 30
V1_NO_LIMIT = "9223372036854771712"
MACHINE = SimpleNamespace(total=64 * GB, available=48 * GB)


@pytest.fixture(autouse=True)
def machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """psutil's figures fixed (the real ones move between calls)."""
    monkeypatch.setattr("gtool.memory.psutil.virtual_memory", lambda: MACHINE)


def write(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text + "\n")


def proc(tmp_path: Path, text: str) -> Path:
    file = tmp_path / "proc-cgroup"
    file.write_text(text)
    return file


def test_the_smallest_v1_limit_on_the_way_up_binds_and_inactive_cache_counts_as_available(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory"
    write(memory, {"memory.limit_in_bytes": V1_NO_LIMIT, "memory.usage_in_bytes": str(GB)})
    write(memory / "jobs", {"memory.limit_in_bytes": str(2 * GB), "memory.usage_in_bytes": str(GB)})
    write(
        memory / "jobs" / "mine",
        {
            "memory.limit_in_bytes": str(3 * GB),
            "memory.usage_in_bytes": str(GB // 2),
            "memory.stat": f"cache 1\ninactive_file 9\ntotal_inactive_file {GB // 4}",
        },
    )
    lines = "4:memory:/jobs/mine\n1:cpu:/\n0::/\n"
    found = machine_memory(tmp_path, proc(tmp_path, lines))
    assert found.total == 2 * GB  # the parent's limit binds
    assert found.available == GB  # 2 GB less its 1 GB working set
    write(memory / "jobs", {"memory.limit_in_bytes": V1_NO_LIMIT})
    mine = machine_memory(tmp_path, proc(tmp_path, "4:memory:/jobs/mine\n"))
    assert mine.total == 3 * GB
    assert mine.available == 3 * GB - GB // 4


def test_v2_reads_memory_max_and_a_host_path_the_container_does_not_show_falls_back_to_the_mount(
    tmp_path: Path,
) -> None:
    write(tmp_path, {"memory.max": str(GB), "memory.current": str(GB // 2), "memory.stat": "inactive_file 0"})
    write(tmp_path / "app", {"memory.max": "max", "memory.current": str(GB // 2)})
    assert machine_memory(tmp_path, proc(tmp_path, "0::/app\n")).total == GB
    found = machine_memory(tmp_path, proc(tmp_path, "0::/docker/0123abcd\n"))  # the host's path
    assert found.total == GB
    assert found.available == GB // 2


def test_no_limit_no_cgroup_or_no_files_is_the_machine(tmp_path: Path) -> None:
    machine = MACHINE.total
    write(tmp_path / "memory", {"memory.limit_in_bytes": V1_NO_LIMIT})
    assert int(V1_NO_LIMIT) >= NO_LIMIT
    assert machine_memory(tmp_path, proc(tmp_path, "4:memory:/\n")).total == machine
    assert machine_memory(tmp_path, proc(tmp_path, "1:cpu:/\n")).total == machine
    assert machine_memory(tmp_path, tmp_path / "absent").total == machine
    assert machine_memory(tmp_path / "nothing", proc(tmp_path, "0::/x\n")) == (machine, MACHINE.available)
