"""Write a store into a temporary sibling and move it into place only when complete."""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import logging
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import fsspec
from fsspec import AbstractFileSystem

from gtool.errors import GtoolError, StoreExistsError
from gtool.store import layout
from gtool.units import human_bytes

STORAGE_FAILURES = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
}
"""OS errors that are the storage's, not gtool's: reported as one line, not a traceback."""
DEVICE_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
SHORT_WRITE = re.compile(r"\d+ requested and \d+ written|Not enough free space to write \d+ bytes")
"""numpy's OSErrors (no errno) when a file took fewer bytes than written to it, or `tofile` found no room
for them (a full device)."""


def is_url(location: str) -> bool:
    """True for fsspec URLs other than file:// (object stores and the like)."""
    return "://" in location and not location.startswith("file://")


def local_path(location: str) -> str:
    """A local path for a plain path or a file:// URL."""
    return location.removeprefix("file://")


def absolute_location(location: str) -> str:
    """`location` as it can be handed to other processes (ranks, workers, other machines): a URL as it is,
    a path made absolute (~ expanded) against this process's working folder, once."""
    if is_url(location):
        return location
    return os.path.abspath(os.path.expanduser(local_path(location)))


def within(location: str, folder: str) -> bool:
    """True when `location` is the folder `folder` or lies under it (local paths resolved through links;
    URLs compared as written)."""
    if is_url(location) != is_url(folder):
        return False
    if is_url(location):
        return f"{location.rstrip('/')}/".startswith(f"{folder.rstrip('/')}/")
    return Path(local_path(location)).resolve().is_relative_to(Path(local_path(folder)).resolve())


def refuse_inside_store(flag: str, location: str, store: str) -> None:
    """Fail when a run's output `location` (given by `flag`) is the store it reads or lies inside it: its
    files would change the store."""
    if within(location, store):
        where = "the store" if within(store, location) else f"inside the store {store}"
        raise GtoolError(
            f"{flag} {location}: {where} (the run's files would change it); name a place outside it"
        )


def staging_path(location: str) -> str:
    """Where a run writes the output `location` until it is complete: `.NAME.partial` beside a local
    path, the URL itself."""
    if is_url(location):
        return location
    target = Path(local_path(location))
    return str(target.parent / f".{target.name}.partial")


def published(location: str) -> str:
    """What a run that published its store made, said should a signal come after: the store is whole."""
    return f"the store was published: {location} is complete"


def make_folder(path: Path, what: str) -> None:
    """Make folder `path` and its parents; a file in the way is an error naming the folder and what it is."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise GtoolError(f"{path} ({what}): not a folder: a file is in the way (there, or above)") from None
    except OSError as exc:
        if exc.errno not in STORAGE_FAILURES:
            raise
        raise GtoolError(f"{path} ({what}): cannot be made ({STORAGE_FAILURES[exc.errno]})") from None


def check_writable(path: Path, what: str) -> None:
    """Fail unless file `path` can be opened for appending (made and removed again when it is new), so
    that a read-only device or a place that takes no files is one error naming it before any work."""
    existed = path.exists()
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))
    except OSError as exc:
        why = STORAGE_FAILURES.get(exc.errno or 0) or (exc.strerror or str(exc)).lower()
        if exc.errno == errno.ENOENT and path.parent.is_dir():
            why = "its folder takes no new files"
        raise GtoolError(f"{what} {path}: cannot be written ({why})") from None
    if not existed:
        path.unlink()


def check_output_file(path: Path, flag: str, holds: str) -> None:
    """A file a run will write (given by `flag`, for `holds`), checked before any work: not a folder, its
    folder made, writable."""
    if path.is_dir():
        raise GtoolError(f"{flag} {path}: a folder; name a file for {holds}")
    make_folder(path.parent, f"the folder of {flag}")
    check_writable(path, flag)


def storage_error(exc: OSError, output: str, places: dict[str, str] | None = None) -> GtoolError | None:
    """The one-line error of a run that failed for lack of space or permission, else None.

    An error that names no file is told where it happened: for a full device, the one of the run's
    `places` (what -> folder: the output's, the spill folder, the cache) with the least space left."""
    if exc.errno in STORAGE_FAILURES:
        why = STORAGE_FAILURES[exc.errno]
    elif exc.errno is None and SHORT_WRITE.search(str(exc)):
        why = f"a short write ({exc}): the device is probably full"
    else:
        return None
    full = exc.errno in DEVICE_FULL or exc.errno is None
    where = exc.filename or (fullest(places or {}) if full else None) or output
    return GtoolError(
        f"{where}: {why}; nothing was published to {output} (a store that was there is unchanged)"
    )


def fullest(places: dict[str, str]) -> str | None:
    """'FOLDER (WHAT, N.N MiB free ...)' of the place with the least space left (the first of equals), None
    when none can be looked at. Asked once the run has removed its files: what they took is free again,
    once the memory maps of removed files that only garbage (the failed run's reference cycles) still held
    are collected (till then their blocks stay allocated)."""
    gc.collect()
    left = {}
    for what, folder in places.items():
        with contextlib.suppress(OSError):
            left[what] = (shutil.disk_usage(folder).free, folder)
    if not left:
        return None
    what, (free, folder) = min(left.items(), key=lambda item: item[1][0])
    return f"{folder} ({what}, {human_bytes(free)} free after removing this run's files)"


@dataclass(frozen=True)
class OutputKind:
    """What a command writes: the attribute that marks its outputs (the only Zarr groups its --overwrite
    replaces, with empty folders) and their name in messages."""

    marker: str
    name: str


STORE_OUTPUT = OutputKind(layout.META_KEY, "a gtool store")
"""`gtool shard`'s outputs: groups holding gtool's metadata."""
PREDICT_OUTPUT = OutputKind(layout.PREDICTIONS_KEY, "a gtool predict output")
"""`gtool predict`'s outputs: what its --overwrite replaces (with an empty folder), never a graph store."""


def replaceable(fs: AbstractFileSystem, path: str, kind: OutputKind = STORE_OUTPUT) -> bool:
    """Whether --overwrite may remove what is at `path`: an output of `kind` (a Zarr group whose attributes
    hold its marker, and besides its zarr.json only folders: a file beside them, such as a checkpoint's
    latest.json, is not the output's) or an empty folder; never a file or any other folder (a graph store
    for predictions)."""
    if not fs.isdir(path):
        return False
    entries = fs.ls(path, detail=True)
    if not entries:
        return True
    if any(
        e["type"] != "directory" and e["name"].rstrip("/").rsplit("/", 1)[-1] != "zarr.json" for e in entries
    ):
        return False
    try:
        document = json.loads(fs.cat_file(f"{path.rstrip('/')}/zarr.json"))
    except (OSError, ValueError):
        return False
    attributes = document.get("attributes") if isinstance(document, dict) else None
    return isinstance(attributes, dict) and isinstance(attributes.get(kind.marker), dict)


def check_replaceable(
    fs: AbstractFileSystem, path: str, location: str, overwrite: bool, kind: OutputKind = STORE_OUTPUT
) -> None:
    """Refuse an existing output without --overwrite, and one --overwrite may not replace."""
    if not fs.exists(path):
        return
    if not overwrite:
        raise StoreExistsError(f"{location} already exists; pass --overwrite to replace it")
    if not replaceable(fs, path, kind):
        raise StoreExistsError(
            f"{location} exists and is neither {kind.name} nor an empty folder: --overwrite replaces "
            "only those (remove it yourself, or choose another -o)"
        )


def check_output(location: str, overwrite: bool, kind: OutputKind = STORE_OUTPUT) -> None:
    """`check_replaceable` for an output path or URL (before a run starts: StagedOutput checks again)."""
    if is_url(location):
        fs, path = fsspec.core.url_to_fs(location)
    else:
        fs, path = fsspec.filesystem("file"), local_path(location)
    check_replaceable(fs, path, location, overwrite, kind)


def identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of what is at `path`, None when nothing is."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def sync_folder(folder: Path) -> None:
    """Make the renames inside a folder durable (fsync of the folder)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class StagedOutput:
    """The output location of a run: where to write now, and how to publish or discard it.

    Local paths are written to `.NAME.partial` beside the target and renamed at the end; a leftover
    partial (and `.NAME.old`) from an interrupted run is removed first, which is safe because the run
    holds the output's lock (gtool.store.writing.output_lock). URLs are written in place (metadata
    `complete` is set last, so readers refuse them until the end).
    """

    def __init__(self, location: str, overwrite: bool, kind: OutputKind = STORE_OUTPUT):
        self.target = location
        self.published = False
        if is_url(location):
            fs, path = fsspec.core.url_to_fs(location)
            check_replaceable(fs, path, location, overwrite, kind)
            if fs.exists(path):
                fs.rm(path, recursive=True)
            self.path = location
            return
        self.target = local_path(location)
        target = Path(self.target)
        if within(os.getcwd(), location):
            raise GtoolError(
                f"-o {location}: the output would hold the current folder; name a new folder for the store"
            )
        self.recover_old()
        check_replaceable(fsspec.filesystem("file"), str(target), location, overwrite, kind)
        make_folder(target.parent, "the output's folder")
        self.path = staging_path(location)
        shutil.rmtree(self.path, ignore_errors=True)
        self.started_from = identity(target)

    @property
    def identity(self) -> str:
        """The output's full location (absolute path or URL)."""
        return self.target if is_url(self.target) else str(Path(self.target).resolve())

    @property
    def near(self) -> Path:
        """A local path the spill directory can sit beside."""
        return Path.cwd() / "gtool-store" if is_url(self.target) else Path(self.target)

    @property
    def old(self) -> Path:
        """Where a replaced store waits while the new one moves in: `.NAME.old`."""
        target = Path(self.target)
        return target.parent / f".{target.name}.old"

    def recover_old(self) -> None:
        """A `.NAME.old` left by a run killed while publishing: put back in place when the store is missing
        (the run was killed between its two renames), else removed."""
        if not self.old.exists():
            return
        if Path(self.target).exists():
            shutil.rmtree(self.old, ignore_errors=True)
            return
        self.old.rename(self.target)
        logging.getLogger("gtool").warning(
            "notice: %s: put back the store a killed run had moved to %s", self.target, self.old
        )

    def publish(self) -> None:
        """Move the finished store into place (replacing an old one only now, and only the one that was
        there when the run started; a URL is already there); `.NAME.old` goes once the renames are on disk."""
        if not is_url(self.target):
            target, partial = Path(self.target), Path(self.path)
            if identity(target) != self.started_from:
                raise GtoolError(
                    f"{self.target} was created, replaced or removed by another program while this run "
                    "wrote its store; nothing was published"
                )
            if self.started_from is not None:
                target.rename(self.old)
            partial.rename(target)
            sync_folder(target.parent)
            shutil.rmtree(self.old, ignore_errors=True)
        self.published = True

    def discard(self) -> None:
        """Remove what a failed run wrote (nothing once the store is published)."""
        if self.published:
            return
        if is_url(self.target):
            fs, path = fsspec.core.url_to_fs(self.target)
            if fs.exists(path):
                fs.rm(path, recursive=True)
            return
        shutil.rmtree(self.path, ignore_errors=True)
