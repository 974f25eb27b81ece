"""Fetch a missing OGB dataset's zip with ogb's own download helpers (not ogb's in-memory processing)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from gtool.errors import InputError
from gtool.preprocess.sources.ogb.layout import OgbLayout


def move_missing(unpacked: Path, target: Path) -> None:
    """Move the files of `unpacked` that `target` lacks into it (files already there are kept)."""
    for src in sorted(unpacked.rglob("*")):
        dest = target / src.relative_to(unpacked)
        if src.is_file() and not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dest)


def fetch(dataset: OgbLayout, root: str, missing: list[str]) -> None:
    """Download and unzip the dataset into `root`, or fail saying which files to put where."""
    info = dataset.info
    staging = Path(root) / f".{info.dir_name}.download"
    archive = None
    try:
        from ogb.utils import url as ogb_url

        archive = ogb_url.download_url(info.url, root)
        ogb_url.extract_zip(archive, str(staging))
        move_missing(staging / str(info.download_name), dataset.directory)
    except Exception as exc:  # no network, a refused or broken download: the user can place the files
        problem = f"missing {', '.join(missing)}, and downloading {info.url} failed ({exc})"
        raise InputError(str(dataset.directory), f"{problem}; {dataset.how_to_get(root)}") from None
    finally:
        if archive is not None and os.path.exists(archive):
            os.remove(archive)
        shutil.rmtree(staging, ignore_errors=True)
