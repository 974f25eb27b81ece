"""One writer per output: an exclusive lock on `.NAME.lock` beside the output for a whole `gtool shard` run
(for `gtool predict`, its whole run: held by the process that starts its ranks, or by rank 0 of torchrun's).

The lock is the kernel's (flock) on that file, so it goes with its process, however the process ends; the
file also records its owner (pid, host, start time) for the message a second run gets. A file left by an
owner that is gone (killed with -9) is taken over with a notice when it names this host; one naming
another host is refused, since whether its owner still runs cannot be told from here.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import socket
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from gtool.errors import GtoolError
from gtool.store.writing.staging import STORAGE_FAILURES, is_url, local_path, make_folder, storage_error


class OutputLockedError(GtoolError):
    """Another run holds the output's lock."""


def lock_path(target: Path) -> Path:
    """The lock file of an output: `.NAME.lock` beside it."""
    return target.parent / f".{target.name}.lock"


def owner_text(owner: dict[str, Any]) -> str:
    """'pid 12 on host h, started 2026-01-01T00:00:00+00:00' (what a lock file says of its owner)."""
    if not owner:
        return "its owner is just starting"
    return f"pid {owner.get('pid')} on host {owner.get('host')}, started {owner.get('started')}"


def read_owner(fd: int) -> dict[str, Any]:
    """The owner a lock file records ({} when empty or unreadable)."""
    text = os.pread(fd, 4096, 0)
    try:
        owner = json.loads(text) if text.strip() else {}
    except ValueError:
        return {}
    return owner if isinstance(owner, dict) else {}


class OutputLock:
    """Held from `__enter__` to `__exit__`: the exclusive right to write `target` and its staging folders."""

    def __init__(self, target: Path, command: str = "gtool shard"):
        self.target = target
        self.command = command
        self.path = lock_path(target)
        self.fd: int | None = None

    def __enter__(self) -> OutputLock:
        make_folder(self.target.parent, "the output's folder")
        fd = self.lock()
        try:
            self.take_over(fd, read_owner(fd))
        except OSError as exc:  # a full device: the owner record cannot be written
            with contextlib.suppress(OSError):
                if self.same_file(fd):
                    os.unlink(self.path)  # no empty lock file left behind
            os.close(fd)
            raise storage_error(exc, str(self.target)) or exc from None
        self.fd = fd
        return self

    def lock(self) -> int:
        """A descriptor of the lock file, flock'ed by this process, or OutputLockedError naming the holder."""
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:  # a read-only device, a folder without write permission
                if exc.errno not in STORAGE_FAILURES:
                    raise
                raise GtoolError(
                    f"{self.target}: cannot be written ({STORAGE_FAILURES[exc.errno]}: its lock file "
                    f"{self.path} cannot be made); nothing was changed"
                ) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = read_owner(fd)
                os.close(fd)
                raise OutputLockedError(
                    f"{self.target}: another {self.command} run is writing this output ({owner_text(owner)}; "
                    f"lock file {self.path}); wait for it to end, or stop it"
                ) from None
            if self.same_file(fd):
                return fd
            os.close(fd)  # its holder removed the file between our open and our lock: lock the new one

    def same_file(self, fd: int) -> bool:
        """Whether the locked descriptor is still the file at the lock's path."""
        try:
            return os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False

    def take_over(self, fd: int, previous: dict[str, Any]) -> None:
        """Record this run as the owner in the locked file (a previous owner there was killed)."""
        host = socket.gethostname()
        if previous and previous.get("host") != host:
            os.close(fd)  # the file stays: it is that run's
            raise OutputLockedError(
                f"{self.target}: locked by a {self.command} run on another host ({owner_text(previous)}; "
                f"lock file {self.path}); if that run has ended, remove the lock file"
            )
        if previous:
            logging.getLogger("gtool").warning(
                "notice: %s: taking over the lock of a run that is gone (%s)",
                self.target,
                owner_text(previous),
            )
        started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        record = json.dumps({"pid": os.getpid(), "host": host, "started": started}).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, record, 0)
        os.fsync(fd)

    def release(self) -> None:
        """Remove the lock file, then unlock it (a run waiting on the old file then retries the path)."""
        if self.fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        os.close(self.fd)
        self.fd = None

    def __exit__(self, *exc: object) -> None:
        self.release()


def output_lock(output: str, command: str = "gtool shard") -> AbstractContextManager:
    """The lock of a local output (one writer per output); URLs are not locked."""
    return nullcontext() if is_url(output) else OutputLock(Path(os.path.abspath(local_path(output))), command)
