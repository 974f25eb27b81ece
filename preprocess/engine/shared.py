"""Proof, before any work, that every Dask worker sees the places a run shares with it.

A worker of an external cluster may run on another machine: a folder that is not on a shared file
system, or a URL it has no credentials for, would make it write the store's chunks or the spill files
where no other process looks, or fail deep in a stage with a misleading message. So the launching process
writes a token in every place the workers write to (the output's folder or URL, the spill folder, the
cache), and every worker looks for each token and for each input file it will read (same size); a place
that some cannot see is refused with one line naming it, the workers, and what to do.
"""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from gtool.errors import GtoolError
from gtool.store.writing.staging import is_url

TOKEN = ".gtool-shared-"
"""The name of a token file starts so; the run's random id follows."""
SHARED_FS = "a file system every worker sees (NFS, Lustre, a mounted share)"

T = TypeVar("T")


@dataclass(frozen=True)
class Place:
    """A place the workers must see: a folder or URL they write to (a token goes there), or an input
    file they read (of `size` bytes)."""

    what: str
    location: str
    size: int | None = None
    """The input file's size; None for a place written to."""

    @property
    def written(self) -> bool:
        return self.size is None


def token_path(place: Place, run: str) -> str:
    """Where the token of `place` goes (written places only)."""
    return f"{place.location.rstrip('/')}/{TOKEN}{run}"


@contextmanager
def tokens(places: list[Place], run: str) -> Iterator[None]:
    """Write a token in every written place, removed when done."""
    written: list[str] = []
    try:
        for place in places:
            if place.written:
                path = token_path(place, run)
                _write(path, run.encode())
                written.append(path)
        yield
    finally:
        for path in written:
            _remove(path)


def _write(path: str, data: bytes) -> None:
    if is_url(path):
        import fsspec

        fs, inside = fsspec.core.url_to_fs(path)
        fs.pipe_file(inside, data)
        return
    Path(path).write_bytes(data)


def _remove(path: str) -> None:
    try:
        if is_url(path):
            import fsspec

            fs, inside = fsspec.core.url_to_fs(path)
            fs.rm_file(inside)
        else:
            os.unlink(path)
    except Exception:  # noqa: BLE001 - a token left behind is harmless; the run's own error matters
        return


def seen(checks: list[tuple[str, int | None, str]]) -> list[str | None]:
    """Run on a worker: for each (path or URL, size, run id), None when this worker sees it (a token
    holding the run id, or a file of that size), else what it found instead."""
    problems: list[str | None] = []
    for location, size, run in checks:
        try:
            problems.append(_look(location, size, run))
        except Exception as exc:  # noqa: BLE001 - any failure to look is the answer (credentials, network)
            problems.append(f"{type(exc).__name__}: {exc}".splitlines()[0])
    return problems


def _look(location: str, size: int | None, run: str) -> str | None:
    if is_url(location):
        import fsspec

        fs, inside = fsspec.core.url_to_fs(location)
        return None if fs.cat_file(inside) == run.encode() else "another run's token"
    if size is None:
        try:
            return None if Path(location).read_bytes() == run.encode() else "another run's token"
        except FileNotFoundError:
            return "not there"
    try:
        found = os.stat(location)
    except FileNotFoundError:
        return "no such file"
    return None if os.path.isdir(location) or found.st_size == size else f"{found.st_size} bytes, not {size}"


def input_files(*objects: Any) -> list[str]:
    """The files that objects handed to the workers name (absolute paths of files that exist here), found
    in their attributes: a source's or a feature file's, after preparation (copies of compressed members
    in the cache or the spill folder, not the originals)."""
    found: dict[str, None] = {}
    visited: set[int] = set()

    def walk(value: Any, depth: int) -> None:
        if depth > 6 or id(value) in visited or isinstance(value, np.ndarray | bytes | type | Callable):
            return
        visited.add(id(value))
        if isinstance(value, str | Path):
            text = str(value)
            if os.path.isabs(text) and os.path.isfile(text):
                found[text] = None
        elif isinstance(value, dict):
            for item in value.values():
                walk(item, depth + 1)
        elif isinstance(value, list | tuple | set | frozenset):
            for item in value:
                walk(item, depth + 1)
        elif hasattr(value, "__dict__") or hasattr(value, "__slots__"):
            names = list(getattr(value, "__dict__", {})) + list(getattr(value, "__slots__", ()))
            for name in names:
                walk(getattr(value, name, None), depth + 1)

    for obj in objects:
        walk(obj, 0)
    return list(found)


def check_shared(client: Any, places: list[Place], timeout: float) -> None:
    """Refuse the run unless every worker of `client`'s cluster sees every place (one error line naming
    the places, the workers that do not see them, and what to do); a worker that does not answer within
    `timeout` seconds is named as such."""
    run = secrets.token_hex(8)
    with tokens(places, run):
        checks = [(token_path(p, run) if p.written else p.location, p.size, run) for p in places]
        answers = bounded(
            lambda: client.run(seen, checks, on_error="return"), timeout, client, "checking what they see"
        )
    missing: dict[int, list[str]] = {}
    problem: dict[int, str] = {}
    for worker, answer in sorted(answers.items()):
        if isinstance(answer, BaseException):
            raise GtoolError(
                f"Dask worker {worker} could not run gtool's check of the shared folders "
                f"({type(answer).__name__}: {answer}): is gtool installed, the same version, on every worker?"
            )
        for k, found in enumerate(answer):
            if found is not None:
                missing.setdefault(k, []).append(worker)
                problem.setdefault(k, found)
    if missing:
        raise GtoolError(
            "; ".join(refusal(places[k], workers, problem[k]) for k, workers in missing.items())
            + "; nothing was done"
        )


CREDENTIAL_ERRORS = frozenset({"NoCredentialsError", "PartialCredentialsError", "DefaultCredentialsError"})
"""The class names of the errors of object stores' clients (botocore's, google-auth's) for missing
credentials: matched by name, since none of them need be installed."""
CREDENTIALS = "credentials such as AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile in its environment"


def credentials_error(exc: BaseException, output: str) -> GtoolError | None:
    """The one-line error of this process's missing credentials for a URL output, else None."""
    if type(exc).__name__ not in CREDENTIAL_ERRORS:
        return None
    return GtoolError(
        f"-o {output}: cannot reach it ({type(exc).__name__}: {exc}): give this process {CREDENTIALS} "
        "(and every Dask worker, with --scheduler)"
    )


def refusal(place: Place, workers: list[str], found: str) -> str:
    """What one place not seen by some workers says."""
    who = f"Dask worker{'s' if len(workers) > 1 else ''} {', '.join(workers)}"
    if is_url(place.location):
        return (
            f"{place.location} ({place.what}): {who} cannot reach it ({found}): give every worker access "
            f"({CREDENTIALS})"
        )
    if place.written:
        return (
            f"{place.location} ({place.what}): {who} {'do' if len(workers) > 1 else 'does'} not see this "
            f"folder ({found}): put it on {SHARED_FS}"
            + (", or give -o an fsspec URL (s3://...)" if place.what.startswith("-o") else "")
        )
    return f"{place.location} ({place.what}): {who} cannot read it ({found}): put it on {SHARED_FS}"


def bounded(call: Callable[[], T], timeout: float, client: Any, doing: str) -> T:
    """call() (which talks to every worker), or an error naming the workers that stopped answering the
    scheduler when it has not returned within `timeout` seconds (a stopped or hung worker never answers)."""
    before = heartbeats(client)
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(call())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
            failure.append(exc)

    thread = threading.Thread(target=run, name="gtool-bounded", daemon=True)
    thread.start()
    thread.join(timeout)
    if failure:
        raise failure[0]
    if result:
        return result[0]
    after = heartbeats(client)
    silent = sorted(w for w, seen_at in before.items() if after.get(w) == seen_at)
    who = ", ".join(silent) if silent else "some workers"
    raise GtoolError(
        f"Dask worker{'s' if len(silent) > 1 else ''} {who} did not answer within {timeout:g} s ({doing}): "
        "stopped, hung or cut off from the network; restart or remove them, and run again (--worker-timeout "
        "sets this bound)"
    )


def heartbeats(client: Any) -> dict[str, float]:
    """The scheduler's time of each worker's last heartbeat, by address."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    return {address: float(info.get("last_seen", 0.0)) for address, info in workers.items()}


def written_places(named: Iterable[tuple[str, str]]) -> list[Place]:
    """Places the workers write to, from (what, folder or URL) pairs."""
    return [Place(what, location) for what, location in named]


def read_places(files: Iterable[str], what: str) -> list[Place]:
    """Input files the workers read, with their size here."""
    return [Place(what, path, os.path.getsize(path)) for path in files]
