"""`gtool cache list | clear`: the decompressed copies of compressed inputs that `gtool shard` keeps."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from gtool.errors import GtoolError
from gtool.units import counted, human_bytes
from gtool.usercache import KERNELS

from .common import console, out, reports_errors
from .help import App

if TYPE_CHECKING:
    from gtool.preprocess import CacheFolder

app = App(
    help="The decompressed copies of compressed inputs that `gtool shard` keeps for later runs: one per "
    "input member (a deflated .npz member, a .gz text file, an OGB CSV file), named by a fingerprint of "
    "the input (a hash of its size, modification time and first and last MiB), in --cache-dir (default: "
    "$GTOOL_CACHE, else ROOT/gtool-cache).",
    no_args_is_help=True,
)

CACHE_DIR = typer.Option(
    None,
    "--cache-dir",
    metavar="DIR",
    help="The cache folder.",
    show_default="$GTOOL_CACHE, else ROOT/gtool-cache",
)
ROOT = typer.Option(
    None, "--root", metavar="DIR", help="ROOT of named datasets.", show_default="$GTOOL_DATA, else ./data"
)


def folder_of(cache_dir: str | None, root: str | None) -> CacheFolder:
    """The cache folder (--cache-dir, else the default); one that is not a folder is an error."""
    from gtool.preprocess import cache_folder

    where = cache_folder(cache_dir, root)
    if where.path.exists() and not where.path.is_dir():
        raise GtoolError(
            f"{where.path} ({where.origin}): not a folder (expected the cache of copies of compressed inputs)"
        )
    return where


def nothing_cached(where: CacheFolder) -> str:
    """The one line of an empty cache, saying where it is looked for (a mistyped --cache-dir shows)."""
    missing = "" if where.path.is_dir() else ", which does not exist"
    return f"nothing cached in {where.path} ({where.origin}{missing})"


@app.command("list")
@reports_errors
def list_cache(cache_dir: str = CACHE_DIR, root: str = ROOT) -> None:
    """List the cached copies: size, state (current; stale: its input changed or is gone; damaged: the copy
    changed since it was written) and input."""
    where = folder_of(cache_dir, root)
    folder = where.path
    from gtool.preprocess import list_entries

    entries = list_entries(folder) if folder.is_dir() else []
    if not entries:
        out.print(nothing_cached(where), soft_wrap=True)
    else:
        table = Table(title=f"gtool cache: {folder}", title_justify="left")
        for column in ("copy", "size", "state", "made from"):
            table.add_column(column, justify="right" if column == "size" else "left", overflow="fold")
        for entry in entries:
            table.add_row(entry.path.name, human_bytes(entry.size), entry.state, entry.source or "")
        out.print(table)
        out.print(f"{len(entries)} copies, {human_bytes(sum(e.size for e in entries))} in all")
    if folder.is_dir():
        note_other_files(folder)


def note_other_files(folder: Path) -> None:
    """Say that files of the folder not named like gtool's copies are not gtool's to list or remove, and
    name gtool plan's machine profiles and the compiled kernels when they are there (plan/, numba/)."""
    from gtool.plan import machine_folder
    from gtool.preprocess import other_files

    others = other_files(folder)
    profiles = folder / machine_folder().name
    if kept := [*profiles.glob("profile-*.json"), *profiles.glob("trials-*.json")]:
        others -= 1
        current = machine_folder()
        used = "" if profiles.resolve() == current.resolve() else f"; no longer read: {current} is"
        files = counted(len(kept), "file")
        console.print(
            f"{profiles}: gtool plan's machine profiles and --grid auto trials ({files}{used}), "
            "not copies: left alone (`gtool plan --recalibrate` measures them again)",
            soft_wrap=True,
        )
    if (folder / KERNELS).is_dir():
        others -= 1
        console.print(
            f"{folder / KERNELS}: gtool's compiled CPU kernels, not copies: left alone (compiled again when "
            "removed)",
            soft_wrap=True,
        )
    if others:
        console.print(f"{others} other file(s) or folder(s) in {folder} are not gtool's copies: left alone")


@app.command("clear")
@reports_errors
def clear_cache(
    cache_dir: str = CACHE_DIR,
    root: str = ROOT,
    stale: bool = typer.Option(
        False,
        "--stale",
        help="Only copies whose input changed or is gone, damaged copies, and leftovers of interrupted runs.",
    ),
) -> None:
    """Remove cached copies (all of them, or with --stale the outdated ones); a later shard extracts again."""
    where = folder_of(cache_dir, root)
    folder = where.path
    if not folder.is_dir():
        out.print(nothing_cached(where), soft_wrap=True)
        return
    keep = ("current", "writing") if stale else ("writing",)
    from gtool.preprocess import list_entries, remove_entries, remove_orphan_notes

    doomed = [e for e in list_entries(folder) if e.state not in keep]
    freed, in_use = remove_entries(doomed)
    remove_orphan_notes(folder)
    out.print(f"removed {len(doomed) - len(in_use)} copies ({human_bytes(freed)}) from {folder}")
    if in_use:
        console.print(f"{len(in_use)} copies in use by a running gtool shard: left")
    note_other_files(folder)
