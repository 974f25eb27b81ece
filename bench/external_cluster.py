"""A Dask cluster as a user starts one: `dask scheduler` and `dask worker` processes on loopback, each
started from a working directory of its own; a worker may see a folder of its own in place of a shared one
(a tmpfs mounted over it in a mount namespace of its own: a node-local folder)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import REPO


def can_hide_folders() -> bool:
    """Whether this machine lets a process mount a folder of its own (unshare -m, as root)."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "true"], capture_output=True, check=False
    )
    return probe.returncode == 0


def whoami() -> tuple[int, str]:
    """A worker's pid and working directory."""
    return os.getpid(), os.getcwd()


def environment() -> dict[str, str]:
    """This environment, with the repository importable from any folder."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    return env


@dataclass
class ExternalCluster:
    """A scheduler and its workers, each a process started from a folder of its own."""

    root: Path
    address: str = ""
    processes: list[subprocess.Popen] = field(default_factory=list)
    worker_folders: list[Path] = field(default_factory=list)

    def start(self, workers: int = 2, hidden: dict[int, Path] | None = None) -> ExternalCluster:
        """Start the scheduler and `workers` workers (worker k sees an empty folder at hidden[k])."""
        folder = self.root / "scheduler"
        folder.mkdir(parents=True)
        info = folder / "scheduler.json"
        command = [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1"]
        self.spawn([*command, "--port", "0", "--no-dashboard", "--scheduler-file", str(info)], folder)
        deadline = time.monotonic() + 60
        while not info.exists() or not info.read_text().strip():
            if time.monotonic() > deadline:
                raise TimeoutError("the scheduler did not start within 60 s")
            time.sleep(0.1)
        self.address = json.loads(info.read_text())["address"]
        for k in range(workers):
            self.add_worker((hidden or {}).get(k))
        self.wait_for(workers)
        return self

    def add_worker(self, hidden: Path | None = None) -> None:
        """Start one more worker (one thread, its own working directory)."""
        folder = self.root / f"worker{len(self.worker_folders)}"
        folder.mkdir(parents=True)
        self.worker_folders.append(folder)
        command = [
            sys.executable,
            "-m",
            "distributed.cli.dask_worker",
            self.address,
            "--nthreads",
            "1",
            "--no-dashboard",
            "--local-directory",
            str(folder / "dask"),
        ]
        if hidden is not None:
            mount = f'mount -t tmpfs none {hidden} && exec "$@"'
            command = ["unshare", "-m", "--propagation", "private", "sh", "-c", mount, "sh", *command]
        self.spawn(command, folder)

    def spawn(self, command: list[str], folder: Path) -> None:
        log = open(folder / "log.txt", "w")  # noqa: SIM115 - kept open by the process
        self.processes.append(
            subprocess.Popen(
                command,
                cwd=folder,
                env=environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    def wait_for(self, workers: int) -> None:
        from distributed import Client

        with Client(self.address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=120)

    def workers(self) -> dict[str, tuple[int, Path]]:
        """The pid of each worker process (not its nanny) and the folder it was started from, by address."""
        from distributed import Client

        with Client(self.address, timeout=60) as client:
            return {a: (pid, Path(cwd)) for a, (pid, cwd) in client.run(whoami).items()}

    def logs(self) -> str:
        return "\n".join(
            (f / "log.txt").read_text(errors="replace")
            for f in [self.root / "scheduler", *self.worker_folders]
        )

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
