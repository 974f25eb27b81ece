"""Write a store into a temporary sibling and move it into place only when complete."""

from __future__ import annotations

import shutil
from pathlib import Path

import fsspec

from gtool.errors import StoreExistsError


def is_url(location: str) -> bool:
    """True for fsspec URLs other than file:// (object stores and the like)."""
    return "://" in location and not location.startswith("file://")


def local_path(location: str) -> str:
    """A local path for a plain path or a file:// URL."""
    return location.removeprefix("file://")


def staging_path(location: str) -> str:
    """Where a run writes the output `location` until it is complete: `.NAME.partial` beside a local
    path, the URL itself."""
    if is_url(location):
        return location
    target = Path(local_path(location))
    return str(target.parent / f".{target.name}.partial")


class StagedOutput:
    """The output location of a run: where to write now, and how to publish or discard it.

    Local paths are written to `.NAME.partial` beside the target and renamed at the end; a leftover
    partial from an interrupted run is removed first. URLs are written in place (metadata `complete`
    is set last, so readers refuse them until the end).
    """

    def __init__(self, location: str, overwrite: bool):
        self.target = location
        self.published = False
        if is_url(location):
            fs, path = fsspec.core.url_to_fs(location)
            if fs.exists(path) and not overwrite:
                raise StoreExistsError(f"{location} already exists; pass --overwrite to replace it")
            if fs.exists(path):
                fs.rm(path, recursive=True)
            self.path = location
            return
        self.target = local_path(location)
        target = Path(self.target)
        if target.exists() and not overwrite:
            raise StoreExistsError(f"{location} already exists; pass --overwrite to replace it")
        target.parent.mkdir(parents=True, exist_ok=True)
        self.path = staging_path(location)
        shutil.rmtree(self.path, ignore_errors=True)

    @property
    def identity(self) -> str:
        """The output's full location (absolute path or URL)."""
        return self.target if is_url(self.target) else str(Path(self.target).resolve())

    @property
    def near(self) -> Path:
        """A local path the spill directory can sit beside."""
        return Path.cwd() / "gtool-store" if is_url(self.target) else Path(self.target)

    def publish(self) -> None:
        """Move the finished store into place (replacing an old one only now; a URL is already there)."""
        if not is_url(self.target):
            target, partial = Path(self.target), Path(self.path)
            old = target.parent / f".{target.name}.old"
            if target.exists():
                shutil.rmtree(old, ignore_errors=True)
                target.rename(old)
            partial.rename(target)
            shutil.rmtree(old, ignore_errors=True)
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
