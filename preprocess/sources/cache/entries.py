"""Cache entries: where a copy of an input goes, what it was made from, and listing and removing them.

A copy of input FILE is FILE.FINGERPRINT.SUFFIX, the fingerprint hashing the input's size, modification
time and first and last MiB, so a changed input gets a new entry and a moved one finds its old one. A note
beside it (ENTRY.source.json) records the input, for `gtool cache list`, and the copy's own size and
modification time: a copy is reused only while they are unchanged. Entries are written under a temporary
name and renamed, so none is ever partial. Only files named like an entry are entries: a cache folder may
hold other files, which are neither listed nor removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import psutil

from gtool.errors import GtoolError
from gtool.preprocess.sources.cache.record import recorded
from gtool.preprocess.sources.dataroot import default_root
from gtool.preprocess.sources.fileinfo import file_checksum
from gtool.store.writing.atomic import write_atomically
from gtool.units import human_bytes

CACHE_FOLDER = "gtool-cache"
NOTE_SUFFIX = ".source.json"
WRITING_SECONDS = 600
"""A temporary file is being written while its process lives and it grew within this many seconds (a
process that reuses the pid of a killed run, or one on another host sharing the cache, writes nothing)."""
ENTRY_NAME = re.compile(
    r"(?P<copy>.+\.[0-9a-f]{16}(?:\.plain|(?:\.[^/]+)?\.npy))(?:\.source\.json)?(?:\.partial-(?P<pid>[0-9]+))?"
)
"""A copy (FILE.FINGERPRINT.SUFFIX, SUFFIX `.plain`, `.npy` or `.MEMBER.npy`), its note (COPY.source.json),
or the temporary file of either being written (.partial-PID)."""


@dataclass(frozen=True)
class CacheFolder:
    """The folder of a run's copies and where it came from, so that an error about it says what to change."""

    path: Path
    origin: str
    """Where the folder came from ('from $GTOOL_CACHE', ...), said after its path in errors."""
    fix: str
    """What to do about a folder that cannot be made or written."""


WRITABLE_FIX = "pass --cache-dir with a folder you can write, or --no-cache"


def cache_folder(cache_dir: str | None, root: str | None) -> CacheFolder:
    """The cache folder: `cache_dir` (--cache-dir), else $GTOOL_CACHE, else ROOT/gtool-cache, ROOT being
    `root` (--root), else $GTOOL_DATA, else ./data; with where it came from. A leading ~ is the home folder,
    as a shell would expand it (one that does not, as in an env file or a quoted value, would otherwise
    make a folder named ~ wherever gtool runs)."""
    if cache_dir:
        return CacheFolder(Path(cache_dir).expanduser(), "given by --cache-dir", WRITABLE_FIX)
    if environment := os.environ.get("GTOOL_CACHE"):
        return CacheFolder(
            Path(environment).expanduser(),
            "from $GTOOL_CACHE",
            "set GTOOL_CACHE to a folder you can write (or unset it), pass --cache-dir, or --no-cache",
        )
    return CacheFolder(
        Path(root or default_root()).expanduser() / CACHE_FOLDER,
        "the default: ROOT/gtool-cache, ROOT from --root, $GTOOL_DATA or ./data",
        "pass --cache-dir (or set GTOOL_CACHE) with a folder you can write, or --no-cache",
    )


class CacheFolderError(GtoolError):
    """The folder of copies cannot be made, is not a folder, cannot be written or lacks room."""

    def __init__(self, folder: str, problem: str, fix: str | None = None):
        self.folder, self.problem, self.fix = folder, problem, fix
        super().__init__(f"{folder}: {problem}: {fix or WRITABLE_FIX}")

    def naming(self, where: CacheFolder) -> CacheFolderError:
        """The same error saying where the folder came from, and what to change there."""
        return CacheFolderError(f"{self.folder} ({where.origin})", self.problem, self.fix or where.fix)


def work_copy_path(workdir: str, path: str, suffix: str) -> str:
    """Where the copy of `path` that `suffix` names goes in workdir: named by the input's fingerprint, so a
    later run of the same input finds it."""
    stat = os.stat(path)
    fingerprint = hashlib.sha256(f"{file_checksum(path)}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    make_folder(workdir)
    return os.path.join(workdir, f"{os.path.basename(path)}.{fingerprint}{suffix}")


def make_folder(workdir: str) -> None:
    """Make the folder of the copies, or fail naming it and why."""
    if os.path.lexists(workdir) and not os.path.isdir(workdir):
        raise CacheFolderError(workdir, "not a folder (expected the folder of copies of compressed inputs)")
    try:
        os.makedirs(workdir, exist_ok=True)
    except OSError as exc:
        raise CacheFolderError(
            workdir, f"cannot make the folder for copies of compressed inputs ({exc.strerror})"
        ) from None


def note_source(copy: str, path: str, made_by: str | None = None) -> None:
    """Record beside a finished copy which input it was made from (its path, size and modification time),
    the copy's own size and modification time, and what made it (`made_by`, for a conversion)."""
    stat, made = os.stat(path), os.stat(copy)
    note = {
        "source": os.path.abspath(path),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "copy_size": made.st_size,
        "copy_mtime_ns": made.st_mtime_ns,
    } | ({"made_by": made_by} if made_by else {})
    write_atomically(copy + NOTE_SUFFIX, lambda out: out.write(json.dumps(note).encode()))


def is_intact(copy: str, size: int | None = None, made_by: str | None = None) -> bool:
    """True when `copy` is there as gtool wrote it: the size and modification time its note recorded (and
    `size`, when given), made by `made_by` when given (a conversion that has changed since is made again).
    A note of an earlier version, without size and time, vouches for any copy of that size."""
    note = read_note(Path(copy))
    try:
        stat = os.stat(copy)
    except OSError:
        return False
    if note is None or size not in (None, stat.st_size) or made_by not in (None, note.get("made_by")):
        return False
    noted = note.get("copy_size", stat.st_size), note.get("copy_mtime_ns", stat.st_mtime_ns)
    return noted == (stat.st_size, stat.st_mtime_ns)


def note_reuse(copy: str, path: str) -> None:
    """A run reuses `copy` for input `path`: renew its note when it names another input (the input was
    moved, or is a copy of the one noted) or lacks the copy's size and time, so `gtool cache list` shows
    it current (a cache that cannot be written keeps its old note)."""
    note = read_note(Path(copy)) or {}
    stat = os.stat(path)
    if (note.get("source"), note.get("size"), note.get("mtime_ns")) != (
        os.path.abspath(path),
        stat.st_size,
        stat.st_mtime_ns,
    ) or "copy_mtime_ns" not in note:
        with contextlib.suppress(OSError):
            note_source(copy, path, note.get("made_by"))


def reused(copy: str, path: str, where: str, size: int | None = None, made_by: str | None = None) -> bool:
    """Whether an intact copy of input `path` is at `copy` (of `size` bytes, by `made_by`: is_intact): then
    it is held, its note renewed and its reuse recorded (as that of `where`)."""
    record = recorded()
    if not (is_intact(copy, size, made_by) and record.hold(copy)):
        return False
    note_reuse(copy, path)
    record.reuse(where, os.path.getsize(copy))
    return True


@contextmanager
def making_copies_of(inputs: Iterable[str]) -> Iterator[None]:
    """Hold an exclusive lock on each input while copies of it are made, so that a second run missing the
    same copies waits for the first (saying so) and then reuses them, rather than both writing them (twice
    the time, and twice the room that each checked alone). An input that cannot be locked (a file system
    without locks) is not."""
    fds = []
    try:
        for path in sorted(set(inputs)):
            fds.append(os.open(path, os.O_RDONLY))
            try:
                fcntl.flock(fds[-1], fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                logging.getLogger("gtool").warning(
                    "notice: waiting for another gtool shard that is making the copies of %s", path
                )
                fcntl.flock(fds[-1], fcntl.LOCK_EX)
            except OSError:
                pass
        yield
    finally:
        for fd in fds:
            os.close(fd)


def work_copy(
    workdir: str,
    path: str,
    suffix: str,
    write: Callable[[BinaryIO], None],
    size: int | None = None,
    made_by: str | None = None,
) -> str:
    """The copy of `path` in workdir that `suffix` names: written once through `write` (atomically, with
    its note, which names `made_by`; the folder, and its free space against `size` when known, checked
    first; a run making it already waited for: making_copies_of), reused by later runs while intact and
    made by `made_by`; held by this run (Preparation.hold) either way, a new one from before its rename."""
    dest = work_copy_path(workdir, path, suffix)
    if reused(dest, path, path, made_by=made_by):
        return dest
    with making_copies_of([path]):
        if reused(dest, path, path, made_by=made_by):
            return dest
        make_way(dest, path)
        check_room(Path(workdir), size or 0, f"converting {path}")
        start = time.perf_counter()
        write_atomically(dest, write, recorded().hold)
        note_source(dest, path, made_by)
        recorded().made([path], os.path.getsize(dest), time.perf_counter() - start)
    return dest


@dataclass(frozen=True)
class CacheEntry:
    """One file of the cache: a copy (with the input it was made from, when its note says) or a leftover
    of an interrupted write."""

    path: Path
    size: int
    source: str | None
    state: str
    """'current' (its input is unchanged), 'stale' (the input changed or is gone), 'damaged' (the copy was
    altered since gtool wrote it), 'writing' (a running process is writing it: WRITING_SECONDS), 'partial'
    (left by an interrupted run) or 'unknown' (no readable note: not reused)."""


def entry_state(copy: Path, note: dict) -> str:
    """'damaged' when the copy changed since it was noted; else 'current' when the noted input still has
    the noted size and modification time, else 'stale'."""
    if not is_intact(str(copy)):
        return "damaged"
    try:
        stat = os.stat(note["source"])
    except OSError:
        return "stale"
    return "current" if (stat.st_size, stat.st_mtime_ns) == (note["size"], note["mtime_ns"]) else "stale"


NOTE_TYPES = {"source": str, "size": int, "mtime_ns": int}
"""What a note must hold (and `copy_size`, `copy_mtime_ns`, when there, are ints too; `made_by` a str)."""


def read_note(copy: Path) -> dict | None:
    """The note of a copy, or None when it has none, it cannot be read or it holds other things (edited by
    hand: a source that is no path, a size that is no number)."""
    try:
        with open(str(copy) + NOTE_SUFFIX) as f:
            note = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(note, dict):
        return None
    present = {"copy_size": int, "copy_mtime_ns": int, "made_by": str}
    types = NOTE_TYPES | {key: kind for key, kind in present.items() if key in note}
    return note if all(isinstance(note.get(key), kind) for key, kind in types.items()) else None


def list_entries(folder: Path) -> list[CacheEntry]:
    """The copies in a cache folder, by name (notes are not listed, nor files not named like a copy; a folder
    that does not exist is empty)."""
    entries = []
    for path in entry_files(folder):
        size = path.stat().st_size
        pid = entry_name(path)["pid"]
        if pid is not None:
            entries.append(CacheEntry(path, size, None, "writing" if is_written(path) else "partial"))
            continue
        note = read_note(path)
        state = entry_state(path, note) if note is not None else "unknown"
        entries.append(CacheEntry(path, size, note["source"] if note else None, state))
    return entries


def is_written(partial: Path) -> bool:
    """Whether a temporary file (.partial-PID) is being written: its process lives and it grew within
    WRITING_SECONDS; else it is a leftover of an interrupted run."""
    try:
        grew = time.time() - partial.stat().st_mtime < WRITING_SECONDS
    except FileNotFoundError:
        return False
    return grew and lives(int(entry_name(partial)["pid"]))


def lives(pid: int) -> bool:
    """Whether process `pid` runs: exists and is no zombie (a killed run not yet reaped by its parent,
    which let go of its locks, so a run waiting for its copies goes on at once)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def make_way(copy: str, where: str) -> None:
    """Before `copy` (of input `where`) is made: fail when something that is no file has its name (a
    folder made there by hand, which the finished copy could not replace), and remove the temporary files
    of it and of its note that interrupted runs left (not those being written: is_written), saying so in
    one line."""
    if os.path.lexists(copy) and not os.path.isfile(copy):
        raise CacheFolderError(
            os.path.dirname(copy),
            f"{os.path.basename(copy)} there, where the copy of {where} goes, is not a file",
            f"remove it (`rm -r {copy}`), or pass another --cache-dir",
        )
    name = os.path.basename(copy)
    left = [
        p
        for p in entry_files(Path(copy).parent)
        if entry_name(p)["pid"] is not None and entry_name(p)["copy"] == name and not is_written(p)
    ]
    freed = 0
    for partial in left:
        with contextlib.suppress(FileNotFoundError):
            freed += partial.stat().st_size
            partial.unlink()
    if left:
        pids = ", ".join(sorted({entry_name(p)["pid"] for p in left}, key=int))
        logging.getLogger("gtool").warning(
            "notice: removed %d temporary file(s) of %s (%.1f MiB) that interrupted runs (pid %s) left in %s",
            len(left),
            where,
            freed / (1 << 20),
            pids,
            Path(copy).parent,
        )


def entry_name(path: Path) -> re.Match[str]:
    """The parts of an entry file's name (`copy`, and `pid` for a temporary file)."""
    match = ENTRY_NAME.fullmatch(path.name)
    if match is None:
        raise ValueError(f"{path}: not a cache entry")
    return match


def entry_files(folder: Path) -> list[Path]:
    """The files of `folder` named like a copy or a copy being written, sorted."""
    if not folder.is_dir():
        return []
    return sorted(
        p
        for p in folder.iterdir()
        if not p.name.endswith(NOTE_SUFFIX) and ENTRY_NAME.fullmatch(p.name) and p.is_file()
    )


def other_files(folder: Path) -> int:
    """How many files of `folder` are neither entries nor their notes (left alone by `gtool cache`)."""
    if not folder.is_dir():
        return 0
    return sum(1 for p in folder.iterdir() if not ENTRY_NAME.fullmatch(p.name.removesuffix(NOTE_SUFFIX)))


def remove_entries(entries: list[CacheEntry]) -> tuple[int, list[CacheEntry]]:
    """Delete entries with their notes, but those a running `gtool shard` holds (Preparation.hold); returns
    the bytes freed and the entries left because they are in use."""
    freed, in_use = 0, []
    for entry in entries:
        with exclusively(entry.path) as free:
            if not free:
                in_use.append(entry)
                continue
            for path in (entry.path, Path(str(entry.path) + NOTE_SUFFIX)):
                path.unlink(missing_ok=True)
            freed += entry.size
    return freed, in_use


@contextmanager
def exclusively(path: Path) -> Iterator[bool]:
    """Hold an exclusive lock on `path` (True), or False when a running run holds a shared one."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        yield True
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        except OSError:  # a file system without locks: nothing to respect
            pass
        yield True
    finally:
        os.close(fd)


def remove_orphan_notes(folder: Path) -> None:
    """Delete the notes of copies that are gone (their write failed, or they were removed by hand)."""
    if folder.is_dir():
        for note in folder.glob(f"*{NOTE_SUFFIX}"):
            copy = Path(str(note).removesuffix(NOTE_SUFFIX))
            if ENTRY_NAME.fullmatch(copy.name) and not copy.exists():
                note.unlink(missing_ok=True)


def free_bytes(folder: Path) -> int:
    """Free space for an unprivileged user on the file system that holds `folder` (or would)."""
    existing = folder
    while not existing.exists():
        existing = existing.parent
    return shutil.disk_usage(existing).free


def check_room(folder: Path, need: int, what: str) -> None:
    """Fail before writing `need` bytes into `folder` when no file can be made there or its file system has
    less free space."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise CacheFolderError(str(folder), f"cannot be written ({exc.strerror}), for {what}") from None
    free = free_bytes(folder)
    if need > free:
        raise CacheFolderError(
            str(folder),
            f"{what} needs {human_bytes(need, up=True)} there, which has {human_bytes(free)} free",
            "free some space (`gtool cache list` shows the cached copies, `gtool cache clear` removes them) "
            "or pass --cache-dir on a disk with room",
        )
