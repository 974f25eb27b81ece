"""`gtool cache list | clear`: the decompressed copies of compressed inputs that `gtool shard` keeps."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.table import Table

from gtool.errors import GtoolError
from gtool.units import human_bytes

from .common import console, reports_errors

app = typer.Typer(
    help="The decompressed copies of compressed inputs that `gtool shard` keeps for later runs: one per "
    "input member (a deflated .npz member, a .gz text file, an OGB CSV file), named by a fingerprint of "
    "the input (a hash of its size, modification time and first and last MiB), in --cache-dir (default: "
    "$GTOOL_CACHE, else ROOT/gtool-cache).",
    no_args_is_help=True,
)

CACHE_DIR = typer.Option(
    None, "--cache-dir", help="The cache folder (default: $GTOOL_CACHE, else ROOT/gtool-cache)."
)
ROOT = typer.Option(None, "--root", help="ROOT of named datasets (default: $GTOOL_DATA, else ./data).")


def folder_of(cache_dir: str | None, root: str | None) -> Path:
    """The cache folder (--cache-dir, else the default); one that is not a folder is an error, one that is
    not there is said to be empty (both naming where the folder came from)."""
    from gtool.preprocess import cache_folder

    where = cache_folder(cache_dir, root or os.environ.get("GTOOL_DATA"))
    folder = where.path
    if folder.exists() and not folder.is_dir():
        raise GtoolError(
            f"{folder} ({where.origin}): not a folder (expected the cache of copies of compressed inputs)"
        )
    if not folder.exists():
        console.print(f"{folder} ({where.origin}): no such folder: nothing is cached there")
    return folder


@app.command("list")
@reports_errors
def list_cache(cache_dir: str = CACHE_DIR, root: str = ROOT) -> None:
    """List the cached copies: size, state (current; stale: its input changed or is gone; damaged: the copy
    changed since it was written) and input."""
    folder = folder_of(cache_dir, root)
    from gtool.preprocess import list_entries

    entries = list_entries(folder)
    table = Table(title=f"gtool cache: {folder}", title_justify="left")
    for column in ("copy", "size", "state", "made from"):
        table.add_column(column, justify="right" if column == "size" else "left", overflow="fold")
    for entry in entries:
        table.add_row(entry.path.name, human_bytes(entry.size), entry.state, entry.source or "")
    console.print(table)
    console.print(f"{len(entries)} copies, {human_bytes(sum(e.size for e in entries))} in all")
    note_other_files(folder)


def note_other_files(folder: Path) -> None:
    """Say that files of the folder not named like gtool's copies are not gtool's to list or remove."""
    from gtool.preprocess import other_files

    others = other_files(folder)
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
    folder = folder_of(cache_dir, root)
    keep = ("current", "writing") if stale else ("writing",)
    from gtool.preprocess import list_entries, remove_entries, remove_orphan_notes

    doomed = [e for e in list_entries(folder) if e.state not in keep]
    freed, in_use = remove_entries(doomed)
    remove_orphan_notes(folder)
    console.print(f"removed {len(doomed) - len(in_use)} copies ({human_bytes(freed)}) from {folder}")
    if in_use:
        console.print(f"{len(in_use)} copies in use by a running gtool shard: left")
    note_other_files(folder)
