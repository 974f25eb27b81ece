"""Deflated .npz members extracted into the cache: checked for room first, in parallel, with progress.

A deflate stream decompresses only from its start, so one member is one thread's work; members are
extracted side by side, one thread each up to the cores (inflate releases the GIL). When one fails, or
the run is interrupted, the others stop within a piece. What happened (extracted or reused, bytes, time)
is recorded for the run's summary (gtool.preprocess.sources.cache.record).
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TimeElapsedColumn,
    TransferSpeedColumn,
)

from gtool.cores import available_cores
from gtool.preprocess.sources.base import FeatureSource, GraphSource
from gtool.preprocess.sources.cache.entries import (
    CacheFolder,
    CacheFolderError,
    check_room,
    make_way,
    making_copies_of,
    note_source,
    reused,
)
from gtool.preprocess.sources.cache.record import Preparation, recorded, watching
from gtool.preprocess.sources.npzmember import NpzMember
from gtool.terminal import description_column


def prepare_source(
    source: GraphSource,
    workdir: CacheFolder,
    console: Console | None,
    show: bool,
    features: FeatureSource | None = None,
) -> Preparation:
    """source.prepare(workdir) and features.prepare(workdir) (a --features file), with a progress bar per
    member extracted; what they did, for the summary, holding the copies they use until its `close`. An
    error about the folder says where it came from."""
    bars = Progress(
        description_column(18),
        BarColumn(),
        DownloadColumn(binary_units=True),
        TransferSpeedColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not show,
    )
    start = time.perf_counter()
    with bars, watching(bars) as record:
        try:
            source.prepare(str(workdir.path))
            if features is not None:
                features.prepare(str(workdir.path))
        except CacheFolderError as exc:
            record.close()
            raise exc.naming(workdir) from None
        except BaseException:
            record.close()
            raise
    record.folder, record.seconds = os.path.abspath(workdir.path), time.perf_counter() - start
    return record


def extract_members(jobs: list[tuple[NpzMember, str]]) -> None:
    """Extract each member to its destination, unless an intact copy is already there (entries.is_intact,
    of the size its zip entry declares), or another run that was making it made it meanwhile (the inputs
    of missing copies are locked while they are made: entries.making_copies_of)."""
    missing = [(m, dest) for m, dest in jobs if not reused(dest, m.path, m.where, m.info.file_size)]
    if not missing:
        return
    with making_copies_of(member.path for member, _ in missing):
        missing = [(m, dest) for m, dest in missing if not reused(dest, m.path, m.where, m.info.file_size)]
        if missing:
            extract_missing(missing)


def extract_missing(missing: list[tuple[NpzMember, str]]) -> None:
    """Extract the members whose copies are missing.

    A missing copy's name taken by something that is no file is refused, and the temporary files of it
    that interrupted runs left are removed, first (see entries.make_way); then the free space for the
    missing copies is checked (an error names the folder, what is needed and what is free); then the
    members are extracted in parallel, one thread each."""
    record = recorded()
    for member, dest in missing:
        make_way(dest, member.where)
    names = ", ".join(member.where for member, _ in missing)
    for folder in {os.path.dirname(dest) for _, dest in missing}:
        need = sum(m.info.file_size for m, dest in missing if os.path.dirname(dest) == folder)
        check_room(Path(folder), need, f"extracting {names}")
    start = time.perf_counter()
    stop = threading.Event()
    pool = ThreadPoolExecutor(min(len(missing), available_cores()))
    try:
        for future in as_completed([pool.submit(extract_one, *job, record, stop) for job in missing]):
            future.result()
    except BaseException:
        stop.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    size = sum(member.info.file_size for member, _ in missing)
    record.made([member.where for member, _ in missing], size, time.perf_counter() - start)


class Stopped(Exception):
    """An extraction given up because another one failed or the run was interrupted."""


def extract_one(member: NpzMember, dest: str, record: Preparation, stop: threading.Event) -> None:
    """Extract one member, advancing a progress bar of its own (the record's), holding the copy from before
    it is renamed into place (`gtool cache clear` never finds it unheld) and noting it (so a run stopped
    later keeps it for the next); give up (leaving no copy) once `stop` is set."""
    bars = record.progress
    bar = None if bars is None else bars.add_task(f"extract {member.key}", total=member.info.file_size)

    def done(n: int) -> None:
        if stop.is_set():
            raise Stopped(member.where)
        if bars is not None and bar is not None:
            bars.advance(bar, n)

    member.extract(dest, done, record.hold)
    note_source(dest, member.path)
