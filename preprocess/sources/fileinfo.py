"""What the file-format sources share: file checks, checksum, description, a base class."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import Any, BinaryIO

from gtool.errors import InputError
from gtool.preprocess.sources.base import GraphSource
from gtool.store.writing.atomic import write_atomically

MIB = 1 << 20
COPY_BYTES = 16 * MIB
READ_BYTES = 64 * MIB
CHECKSUM_KEY = "sha256_first_mib_last_mib_size"


def check_readable(path: str) -> None:
    """Fail with an InputError unless `path` is an existing regular file."""
    if not os.path.exists(path):
        raise InputError(path, "no such file")
    if not os.path.isfile(path):
        raise InputError(path, "expected a file, got a directory or special file")


def file_checksum(path: str) -> str:
    """sha256 over the first MiB, the last MiB and the decimal size of the file (cheap for huge files)."""
    size = os.path.getsize(path)
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        digest.update(f.read(MIB))
        if size > MIB:
            f.seek(max(MIB, size - MIB))
            digest.update(f.read(MIB))
    digest.update(str(size).encode())
    return digest.hexdigest()


def describe_file(path: str, fmt: str, **extra: Any) -> dict[str, Any]:
    """The `source` metadata of a file-format source: name, path, format, size, cheap checksum."""
    return {
        "name": os.path.basename(path),
        "path": os.path.abspath(path),
        "format": fmt,
        "size_bytes": os.path.getsize(path),
        CHECKSUM_KEY: file_checksum(path),
        **extra,
    }


def write_once(dest: str, write: Callable[[BinaryIO], None]) -> str:
    """Like write_atomically, but keep a `dest` that an earlier run completed."""
    return dest if os.path.exists(dest) else write_atomically(dest, write)


class FileSource(GraphSource):
    """A graph source read from one file: its path, name, and the node count the user declared."""

    def __init__(self, path: str, num_nodes: int | None):
        self.path = path
        self.name = os.path.basename(path)
        self.declared_nodes = num_nodes

    def num_nodes(self) -> int | None:
        return self.declared_nodes
