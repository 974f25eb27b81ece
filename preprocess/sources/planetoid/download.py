"""Planetoid datasets by name (cora, citeseer, pubmed): Kipf & Welling's ind.NAME.* files, fetched once.

The files come from the Planetoid repository (the source PyG's Planetoid dataset uses), or from the base
URL in $GTOOL_PLANETOID_URL (http(s):// or file:// only, e.g. a local mirror), into ROOT/planetoid/NAME.
Every file must match the SHA-256 of the published file (PINNED_SHA256), downloaded or already there: an
HTML error page, a download closed early (with or without a Content-Length) or a changed file is
refused. Each file is written through a temporary file renamed into place once complete and verified,
so a failed download leaves no file that looks complete; files already present are never fetched again.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import urllib.parse
import urllib.request
from pathlib import Path
from typing import BinaryIO

from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

from gtool.errors import InputError
from gtool.preprocess.sources.fileinfo import COPY_BYTES
from gtool.store.writing.atomic import write_atomically
from gtool.terminal import description_column, plain_console, transient_progress

NAMES = ("cora", "citeseer", "pubmed")
PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")
DEFAULT_URL = "https://github.com/kimiyoung/planetoid/raw/master/data"
URL_VARIABLE = "GTOOL_PLANETOID_URL"
TIMEOUT_S = 60
DOWNLOAD_ERRORS = (OSError, ValueError, http.client.HTTPException)
SCHEMES = ("http", "https", "file")
PINNED_SHA256 = {
    "cora": {
        "x": "23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab",
        "y": "94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1",
        "tx": "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a",
        "ty": "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad",
        "allx": "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543",
        "ally": "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71",
        "graph": "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d",
        "test.index": "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875",
    },
    "citeseer": {
        "x": "d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6",
        "y": "8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924",
        "tx": "539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21",
        "ty": "55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce",
        "allx": "2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668",
        "ally": "f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95",
        "graph": "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7",
        "test.index": "2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4",
    },
    "pubmed": {
        "x": "fbe9cb5c47200d1b7769a26e579be3b7130b556831f9d850e77c4c74f2599b33",
        "y": "e6c807633307a07ed659249006536a147c7999c797f11a2560752990181b41b3",
        "tx": "4eb5f5d0f30f26497eb0ac6ac9719d09c67e284f1ed0385c93f3ef27a671da3d",
        "ty": "ee2e0d4819d9fbcc403689c3bf2e49face401b605932f093bc58ab6461130fdd",
        "allx": "508e538e2abdccdd54c4d3e9f49d638b4af7107d85845f66ddea5a5152658b7e",
        "ally": "0c37bbe3b5014ec365e9d393cf4791925e5ed94fb194305d74f064a8d7b50f0e",
        "graph": "5b89f0036ca22909471f1e6558eb42fa06e0c730a577bde5b058b40638f81dc9",
        "test.index": "b101d421688bbaecbd82e8a18f1e282378d6830f3a37666f28ebc47f844341b5",
    },
}
"""SHA-256 of the published files (kimiyoung/planetoid's data folder): Cora's computed from the files
the project keeps for its tests, CiteSeer's and PubMed's as two independent public projects pin them."""


def planetoid_name(spec: str) -> str | None:
    """The dataset a name means ('Cora', 'cora', ...), or None."""
    name = spec.lower()
    return name if name in NAMES else None


def base_url() -> str:
    """Where the ind.NAME.* files are fetched from: $GTOOL_PLANETOID_URL (http, https or file), else the
    Planetoid repository."""
    url = (os.environ.get(URL_VARIABLE) or DEFAULT_URL).rstrip("/")
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in SCHEMES:
        expected = f"expected an http://, https:// or file:// URL, got {scheme or 'no'} scheme in {url!r}"
        raise InputError(URL_VARIABLE, expected)
    return url


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for piece in iter(lambda: f.read(COPY_BYTES), b""):
            digest.update(piece)
    return digest.hexdigest()


def check_published(name: str, file: str, digest: str, where: str, hint: str = "") -> None:
    """Fail unless `digest` is the SHA-256 of the published file `file` of dataset `name`."""
    expected = PINNED_SHA256[name][file.removeprefix(f"ind.{name}.")]
    if digest != expected:
        raise InputError(
            where,
            f"not the published {file} (SHA-256 {digest}, expected {expected}): an error page, a cut-short "
            f"download or a changed file{hint}",
        )


def fetch_planetoid(name: str, root: str, progress: bool = True) -> Path:
    """ROOT/planetoid/NAME holding the dataset's files, downloading the missing ones; a failed download
    leaves no folder it made empty."""
    folder = Path(root) / "planetoid" / name
    files = [f"ind.{name}.{part}" for part in PARTS]
    missing = [file for file in files if not (folder / file).is_file()]
    for file in sorted(set(files) - set(missing)):
        hint = "; delete it to download it again"
        check_published(name, file, sha256_of(folder / file), str(folder / file), hint)
    if not missing:
        return folder
    url = base_url()
    made = [place for place in (folder, *folder.parents) if not place.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    console = plain_console(stderr=True)
    columns = (description_column(), BarColumn(), DownloadColumn(), TransferSpeedColumn())
    try:
        with transient_progress(console, *columns, shown=progress) as bars:
            for file in missing:
                file_url = f"{url}/{file}"

                def fetch(out: BinaryIO, file: str = file, file_url: str = file_url) -> None:
                    check_published(name, file, copy_url(file_url, out, bars), file_url)

                try:
                    write_atomically(str(folder / file), fetch)
                except DOWNLOAD_ERRORS as exc:
                    problem = (
                        f"downloading {file_url} failed ({exc}); set {URL_VARIABLE} to a mirror of "
                        f"{DEFAULT_URL}, or put the files {', '.join(files)} into {folder}"
                    )
                    raise InputError(name, problem) from None
    except BaseException:  # a failed download, a signal: no empty folder of this run's is left
        remove_if_empty(made)
        raise
    if progress:
        console.print(f"downloaded {len(missing)} files of {name} into {folder}")
    return folder


def remove_if_empty(folders: list[Path]) -> None:
    """Remove the `folders` a failed download made (innermost first) while they are empty: a later run,
    or the user, finds no empty ROOT/planetoid/NAME taken for a dataset."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # not empty (files of another dataset, a download that did arrive): kept
            return


def copy_url(url: str, out: BinaryIO, bars: Progress) -> str:
    """Stream `url` into `out` and return the SHA-256 of its bytes, failing on an HTML page or when fewer
    bytes arrive than the server announced."""
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        kind = response.headers.get_content_type()
        if kind == "text/html":
            raise InputError(url, "the server sent an HTML page (an error page?), not a Planetoid file")
        length = response.headers.get("Content-Length")
        total = int(length) if length is not None else None
        bar = bars.add_task(url.rsplit("/", 1)[-1], total=total)
        received = 0
        for piece in iter(lambda: response.read(COPY_BYTES), b""):
            out.write(piece)
            digest.update(piece)
            received += len(piece)
            bars.update(bar, completed=received)
    if total is not None and received != total:
        raise InputError(url, f"the download ended after {received:,} of {total:,} bytes")
    return digest.hexdigest()
