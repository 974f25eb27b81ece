"""Cache entries: where a copy of an input goes, what it was made from, and listing and removing them.

A copy of input FILE is named FILE.FINGERPRINT.SUFFIX (SUFFIX says what it holds, e.g. `.node_feat.npy`
for a member of an .npz): FINGERPRINT hashes the input's size, modification time and its first and last
MiB, so a changed input gets a new entry and an unchanged one, wherever it was moved, finds its old one.
Each entry has a note beside it (ENTRY.source.json) that records the input it was made from, for
`gtool cache list`. Entries are written to a temporary name and renamed, so none is ever partial.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import psutil

from gtool.errors import GtoolError
from gtool.preprocess.sources.dataroot import default_root
from gtool.preprocess.sources.fileinfo import file_checksum, write_atomically

CACHE_FOLDER = "gtool-cache"
NOTE_SUFFIX = ".source.json"
PARTIAL_MARK = ".partial-"
GIB = 1 << 30


def default_cache_dir(root: str | None = None) -> Path:
    """$GTOOL_CACHE, else ROOT/gtool-cache, ROOT being `root` (--root), else $GTOOL_DATA, else ./data."""
    return Path(os.environ.get("GTOOL_CACHE") or Path(root or default_root()) / CACHE_FOLDER)


def work_copy_path(workdir: str, path: str, suffix: str) -> str:
    """Where the copy of `path` that `suffix` names goes in workdir: named by the input's fingerprint, so a
    later run of the same input finds it."""
    stat = os.stat(path)
    fingerprint = hashlib.sha256(f"{file_checksum(path)}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    os.makedirs(workdir, exist_ok=True)
    return os.path.join(workdir, f"{os.path.basename(path)}.{fingerprint}{suffix}")


def note_source(copy: str, path: str) -> None:
    """Record beside a finished copy which input it was made from (its path, size and modification time)."""
    stat = os.stat(path)
    note = {"source": os.path.abspath(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    write_atomically(copy + NOTE_SUFFIX, lambda out: out.write(json.dumps(note).encode()))


def work_copy(
    workdir: str, path: str, suffix: str, write: Callable[[BinaryIO], None], size: int | None = None
) -> str:
    """The copy of `path` in workdir that `suffix` names: written once through `write` (atomically, with
    its note; its `size`, when known, checked against the free space first), reused by later runs."""
    dest = work_copy_path(workdir, path, suffix)
    if not os.path.exists(dest):
        if size is not None:
            check_room(Path(workdir), size, f"converting {path}")
        write_atomically(dest, write)
        note_source(dest, path)
    return dest


@dataclass(frozen=True)
class CacheEntry:
    """One file of the cache: a copy (with the input it was made from, when its note says) or a leftover
    of an interrupted write."""

    path: Path
    size: int
    source: str | None
    state: str
    """'current' (its input is unchanged), 'stale' (the input changed or is gone), 'writing' (a running
    process is writing it), 'partial' (left by an interrupted run) or 'unknown' (no readable note)."""


def entry_state(note: dict) -> str:
    """'current' when the noted input still has the noted size and modification time, else 'stale'."""
    try:
        stat = os.stat(note["source"])
    except OSError:
        return "stale"
    return "current" if (stat.st_size, stat.st_mtime_ns) == (note["size"], note["mtime_ns"]) else "stale"


def read_note(copy: Path) -> dict | None:
    """The note of a copy, or None when it has none or it cannot be read."""
    try:
        with open(str(copy) + NOTE_SUFFIX) as f:
            note = json.load(f)
    except (OSError, ValueError):
        return None
    return note if isinstance(note, dict) and {"source", "size", "mtime_ns"} <= note.keys() else None


def list_entries(folder: Path) -> list[CacheEntry]:
    """The copies in a cache folder, by name (notes are not listed; a folder that does not exist is empty)."""
    if not folder.is_dir():
        return []
    entries = []
    for path in sorted(p for p in folder.iterdir() if p.is_file() and not p.name.endswith(NOTE_SUFFIX)):
        size = path.stat().st_size
        if PARTIAL_MARK in path.name:
            pid = path.name.rsplit(PARTIAL_MARK, 1)[1]
            writing = pid.isdigit() and psutil.pid_exists(int(pid))
            entries.append(CacheEntry(path, size, None, "writing" if writing else "partial"))
            continue
        note = read_note(path)
        state = entry_state(note) if note is not None else "unknown"
        entries.append(CacheEntry(path, size, note["source"] if note else None, state))
    return entries


def remove_entries(entries: list[CacheEntry]) -> int:
    """Delete entries with their notes; returns the bytes freed."""
    freed = 0
    for entry in entries:
        freed += entry.size
        for path in (entry.path, Path(str(entry.path) + NOTE_SUFFIX)):
            path.unlink(missing_ok=True)
    return freed


def remove_orphan_notes(folder: Path) -> None:
    """Delete notes whose copy is gone (its write failed, or it was removed by hand)."""
    if folder.is_dir():
        for note in folder.glob(f"*{NOTE_SUFFIX}"):
            if not Path(str(note).removesuffix(NOTE_SUFFIX)).exists():
                note.unlink(missing_ok=True)


def free_bytes(folder: Path) -> int:
    """Free space for an unprivileged user on the file system that holds `folder` (or would)."""
    existing = folder
    while not existing.exists():
        existing = existing.parent
    return shutil.disk_usage(existing).free


def check_room(folder: Path, need: int, what: str) -> None:
    """Fail before writing `need` bytes into `folder` when its file system has less free space."""
    free = free_bytes(folder)
    if need > free:
        raise GtoolError(
            f"{what} needs {need / GIB:.2f} GiB in {folder}, which has {free / GIB:.2f} GiB free: free some "
            "space (`gtool cache list` shows the cached copies, `gtool cache clear` removes them) or pass "
            "--cache-dir on a disk with room"
        )
