"""Every path `gtool shard` hands to its workers, resolved once in the launching process.

A Dask worker runs in a working directory and a home of its own, often on another machine: a relative
path or `~` means something else there (a relative `-o` once put the store's chunks in each worker's own
folder). So the output, the staging and spill folders, the source and the node data files and the cache
are made absolute here (`~` expanded) before anything else runs; URLs stay URLs (`file://` ones become
plain paths).
"""

from __future__ import annotations

import os
from dataclasses import replace

from gtool.errors import GtoolError
from gtool.preprocess.options import ShardOptions
from gtool.store.writing.staging import absolute_location as absolute
from gtool.store.writing.staging import is_url

FOLDERS_ON_DISK = ("--spill-dir", "--cache-dir")
"""Folders whose files are memory-mapped, appended to and truncated in place: they must be on a file
system (local or shared), which an object store (an fsspec URL) is not."""


def folder_on_disk(flag: str, location: str | None) -> str | None:
    """`absolute(location)` for a folder that must be on a file system; a URL other than file:// is refused
    with the reason."""
    if location is None:
        return None
    if is_url(location):
        raise GtoolError(
            f"{flag} {location}: must be a folder on a file system, not a URL: the run memory-maps, appends "
            "to and truncates its files there, which an object store cannot do; give a folder (with "
            "--scheduler, one on a file system every worker sees, such as NFS or Lustre)"
        )
    return absolute(location)


def source_path(spec: str) -> str:
    """SOURCE made absolute when it names a file or folder here (`~` expanded); a generator or a dataset
    name (with no such file or folder) as it is."""
    path = os.path.expanduser(spec)
    return os.path.abspath(path) if spec.strip() and os.path.exists(path) else spec


def resolved(source: str, output: str, options: ShardOptions) -> tuple[str, str, ShardOptions]:
    """SOURCE, the output and the options with every path resolved (see the module's docstring)."""
    return (
        source_path(source),
        absolute(output),
        replace(
            options,
            spill_dir=folder_on_disk(FOLDERS_ON_DISK[0], options.spill_dir),
            cache_dir=folder_on_disk(FOLDERS_ON_DISK[1], options.cache_dir),
            root=absolute(options.root) if options.root else options.root,
            features=absolute(options.features) if options.features else options.features,
            labels=absolute(options.labels) if options.labels else options.labels,
            split=absolute(options.split) if options.split else options.split,
        ),
    )
