"""Run a command with its memory, page cache included, capped by a cgroup v1 memory controller.

    python -m bench.cgroup --memory 2.6GB [--timeout 300] -- gtool shard ...   # as root

The command runs in a new cgroup /sys/fs/cgroup/memory/gtool-bench-PID whose memory.limit_in_bytes is
the cap: its processes' resident memory and the page cache of the files they read and write count
against it, so a file larger than the cap cannot stay cached (as a 57 GB feature file on a 64 GB node).
Caches are dropped first (`sync; echo 3 > /proc/sys/vm/drop_caches`), so capped and uncapped runs both
start cold. Without --memory the command runs uncapped, after the same drop. Prints the wall time, and
for a capped run the cgroup's peak usage and how often it hit the cap.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gtool.units import parse_bytes

MEMORY_CONTROLLER = Path("/sys/fs/cgroup/memory")


def drop_caches() -> None:
    """Write dirty pages back, then drop the page cache, dentries and inodes (needs root)."""
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


@contextmanager
def memory_cgroup(limit: int) -> Iterator[Path]:
    """A new memory cgroup capped at `limit` bytes; removed (once its processes are gone) on exit."""
    group = MEMORY_CONTROLLER / f"gtool-bench-{os.getpid()}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(limit))
        yield group
    finally:
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def run_capped(command: list[str], limit: int | None, timeout: float | None) -> dict:
    """Run `command` cold (caches dropped), in a memory cgroup of `limit` bytes when given: wall seconds,
    whether it finished before `timeout`, its exit status and, capped, the cgroup's peak and hit count."""
    drop_caches()
    if limit is None:
        return _timed(command, timeout)
    with memory_cgroup(limit) as group:
        enter = f'echo $$ > {group / "cgroup.procs"} && exec "$@"'
        figures = _timed(["sh", "-c", enter, "sh", *command], timeout)
        figures["cgroup_peak_mb"] = int((group / "memory.max_usage_in_bytes").read_text()) / (1 << 20)
        figures["cgroup_limit_hits"] = int((group / "memory.failcnt").read_text())
    return figures


def _timed(command: list[str], timeout: float | None) -> dict:
    start = time.perf_counter()
    process = subprocess.Popen(command, start_new_session=True)
    try:
        status = process.wait(timeout=timeout)
        finished = True
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 15)
        status, finished = process.wait(), False
    return {"wall_s": time.perf_counter() - start, "finished": finished, "status": status}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memory", help="cap of memory + page cache, e.g. 2.6GB (default: no cap)")
    parser.add_argument("--timeout", type=float, help="stop the command after this many seconds")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    limit = parse_bytes(args.memory) if args.memory else None
    figures = run_capped(command, limit, args.timeout)
    state = "finished" if figures["finished"] else f"not finished after {figures['wall_s']:.0f} s (stopped)"
    print(f"cgroup run: {figures['wall_s']:.1f} s wall, {state}, exit {figures['status']}")
    if limit is not None:
        print(
            f"cgroup peak {figures['cgroup_peak_mb']:.0f} MB of {limit >> 20} MB, "
            f"cap hit {figures['cgroup_limit_hits']} times"
        )


if __name__ == "__main__":
    main()
