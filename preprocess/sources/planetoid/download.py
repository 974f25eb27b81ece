"""Planetoid datasets by name (cora, citeseer, pubmed): Kipf & Welling's ind.NAME.* files, fetched once.

The files come from the Planetoid repository (the source PyG's Planetoid dataset uses), or from the base
URL in $GTOOL_PLANETOID_URL (http(s):// or file://, e.g. a local mirror), into ROOT/planetoid/NAME. Each
file is written through a temporary file renamed into place, so an interrupted download leaves no file
that looks complete; files already present are never fetched again.
"""

from __future__ import annotations

import functools
import http.client
import os
import urllib.request
from pathlib import Path
from typing import BinaryIO

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from gtool.errors import InputError
from gtool.preprocess.sources.fileinfo import COPY_BYTES, write_atomically

NAMES = ("cora", "citeseer", "pubmed")
PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")
DEFAULT_URL = "https://github.com/kimiyoung/planetoid/raw/master/data"
URL_VARIABLE = "GTOOL_PLANETOID_URL"
TIMEOUT_S = 60
DOWNLOAD_ERRORS = (OSError, ValueError, http.client.HTTPException)


def planetoid_name(spec: str) -> str | None:
    """The dataset a name means ('Cora', 'cora', ...), or None."""
    name = spec.lower()
    return name if name in NAMES else None


def base_url() -> str:
    """Where the ind.NAME.* files are fetched from: $GTOOL_PLANETOID_URL, else the Planetoid repository."""
    return (os.environ.get(URL_VARIABLE) or DEFAULT_URL).rstrip("/")


def fetch_planetoid(name: str, root: str, progress: bool = True) -> Path:
    """ROOT/planetoid/NAME holding the dataset's files, downloading the missing ones."""
    folder = Path(root) / "planetoid" / name
    files = [f"ind.{name}.{part}" for part in PARTS]
    missing = [file for file in files if not (folder / file).is_file()]
    if not missing:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    console = Console(stderr=True)
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
    with Progress(*columns, console=console, disable=not progress, transient=True) as bars:
        for file in missing:
            url = f"{base_url()}/{file}"
            try:
                write_atomically(str(folder / file), functools.partial(copy_url, url, bars=bars))
            except DOWNLOAD_ERRORS as exc:
                problem = (
                    f"downloading {url} failed ({exc}); set {URL_VARIABLE} to a mirror of {DEFAULT_URL}, "
                    f"or put the files {', '.join(files)} into {folder}"
                )
                raise InputError(name, problem) from None
    if progress:
        console.print(f"downloaded {len(missing)} files of {name} into {folder}", highlight=False)
    return folder


def copy_url(url: str, out: BinaryIO, bars: Progress) -> None:
    """Stream `url` into `out`, failing when fewer bytes arrive than the server announced."""
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        length = response.headers.get("Content-Length")
        total = int(length) if length is not None else None
        bar = bars.add_task(url.rsplit("/", 1)[-1], total=total)
        received = 0
        for piece in iter(lambda: response.read(COPY_BYTES), b""):
            out.write(piece)
            received += len(piece)
            bars.update(bar, completed=received)
    if total is not None and received != total:
        raise InputError(url, f"the download ended after {received:,} of {total:,} bytes")
