"""numba's kernels of every room: cached outside the source tree, compiled once per machine.

numba keeps a compiled kernel beside its source (__pycache__), under the checkout's path: a fresh install
compiled it again in every process that called it (8 ranks on 2 cores took 17 s). A `kernel` is cached in
kernel_cache_folder()/VERSION/ROOM, shared by every process and checkout of this version (numba keys each
entry by the source's contents, Python's and numba's versions and the CPU). Where none fits, one process
of the machine compiles while the others wait for it (a lock), saying so in one line on stderr.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import sys
import tempfile
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numba
import psutil
from numba.core import caching
from numba.core.caching import _CacheLocator, _SourceFileBackedLocatorMixin
from numba.core.dispatcher import Dispatcher

from gtool.terminal import QUIET_ENV
from gtool.usercache import KERNELS, user_cache
from gtool.version import __version__

PACKAGE = os.path.dirname(os.path.abspath(__file__))
"""The gtool package's folder: the kernels under it are cached by `SharedLocator`."""
ESTIMATES = {True: 1.5, False: 0.4}
"""Seconds a parallel kernel (True) and a serial one take to compile on a quiet 2-core machine (measured)."""
NOTICE = "compiling gtool's CPU kernels once for this machine (about {seconds:.0f} s)..."

_announced = False
_kernels: dict[str, list[Callable[[], bool]]] = {}
"""Each kernels' module's kernels, as whether each is loaded in this process: the notice's estimate."""


def kernel_cache_folder() -> Path:
    """The user's cache folder's numba/ (gtool.usercache)."""
    return user_cache() / KERNELS


@functools.cache
def _file_hash(path: str, modified: int, size: int) -> bytes:
    with open(path, "rb") as source:
        return hashlib.sha256(source.read()).digest()


def contents_hash(path: str) -> bytes:
    """The sha256 of a file's contents (hashed again only when its time or size change)."""
    status = os.stat(path)
    return _file_hash(path, status.st_mtime_ns, status.st_size)


class SharedLocator(_SourceFileBackedLocatorMixin, _CacheLocator):
    """numba's cache locator for gtool's kernels: the folder of a version's room (kernel_cache_folder()/
    VERSION/trainer/nn/dropout), not of a checkout, so every checkout shares it; the source stamp hashes the
    kernel's file and those of the kernels its module imports (a helper changed elsewhere recompiles)."""

    def __init__(self, py_func: Callable[..., Any], py_file: str):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._globals = py_func.__globals__
        room = os.path.relpath(os.path.dirname(os.path.abspath(py_file)), PACKAGE)
        self._cache_path = str(kernel_cache_folder() / __version__ / room)

    def get_cache_path(self) -> str:
        return self._cache_path

    def get_source_stamp(self) -> tuple[bytes, ...]:
        files = {self._py_file} | {
            value.py_func.__code__.co_filename
            for value in self._globals.values()
            if isinstance(value, Dispatcher)
        }
        return tuple(contents_hash(path) for path in sorted(files))

    @classmethod
    def from_function(cls, py_func: Callable[..., Any], py_file: str) -> SharedLocator | None:
        """A locator for a function of a file under the gtool package whose cache folder can be written,
        else None (numba's own locators then take it)."""
        if os.path.relpath(os.path.abspath(py_file), PACKAGE).startswith(os.pardir):
            return None
        return super().from_function(py_func, py_file)


LOCATORS = (getattr(caching, "CacheImpl", None) or caching._CacheImpl)._locator_classes
"""numba's cache locators, tried in turn (its CacheImpl was _CacheImpl before numba 0.62)."""
if SharedLocator not in LOCATORS:
    LOCATORS.insert(0, SharedLocator)


def cached(dispatcher: Dispatcher, signature: Any) -> bool:
    """Whether numba's cache holds `dispatcher` compiled for `signature` on this CPU (its index's key)."""
    cache = dispatcher._cache
    key = cache._index_key(signature, dispatcher.targetctx.codegen())
    return key in cache._cache_file._load_index()


@contextlib.contextmanager
def machine_lock() -> Iterator[TextIO]:
    """The lock file, held by one process of this machine (this user's) at a time: the one compiling."""
    path = os.path.join(tempfile.gettempdir(), f"gtool-kernels-{os.getuid()}.lock")
    with open(path, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield lock
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def announced_by_sibling(lock: TextIO) -> bool:
    """Whether a live process of this process group (a rank of this run, a worker of this shard) said
    the notice already, as the lock file records (`announce`)."""
    lock.seek(0)
    group, _, pid = lock.read().partition(":")
    return group == str(os.getpgrp()) and pid.isdigit() and psutil.pid_exists(int(pid))


def announce(lock: TextIO, seconds: float) -> None:
    """The notice, once a process group (see `announced_by_sibling`), recorded in the lock file."""
    global _announced
    if _announced:
        return
    _announced = True
    if announced_by_sibling(lock):
        return
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpgrp()}:{os.getpid()}")
    lock.flush()
    if not os.environ.get(QUIET_ENV):
        print(NOTICE.format(seconds=max(1.0, seconds)), file=sys.stderr, flush=True)


def compile_once(dispatcher: Dispatcher, compile_here: Callable[[Any], Any], signature: Any) -> Any:
    """numba's compile of `dispatcher` for `signature` (`compile_here`: numba calls it for each signature
    new to the process), which loads it from the cache where it is there, else compiles it under the
    machine's lock (another process may have written it meanwhile)."""
    if cached(dispatcher, signature):
        return compile_here(signature)
    with machine_lock() as lock:
        if not cached(dispatcher, signature):
            estimate = ESTIMATES[dispatcher.targetoptions.get("parallel", False)]
            waiting = sum(not loaded() for loaded in _kernels[dispatcher.py_func.__module__])
            announce(lock, estimate * waiting)
        return compile_here(signature)


def cached_dispatcher(function: Callable[..., Any], options: dict[str, Any]) -> Dispatcher:
    """numba's `njit(cache=True, **options)` of `function`, compiled once per machine (`compile_once`)."""
    dispatcher = numba.njit(cache=True, **options)(function)
    dispatcher.compile = functools.partial(compile_once, dispatcher, dispatcher.compile)
    return dispatcher


def kernel(**options: Any) -> Callable[[Callable[..., Any]], Dispatcher]:
    """numba's `njit(cache=True, **options)` for a kernel called from Python: its cache outside the source
    tree, its compile once per machine."""

    def decorate(function: Callable[..., Any]) -> Dispatcher:
        dispatcher = cached_dispatcher(function, options)
        _kernels.setdefault(function.__module__, []).append(lambda: bool(dispatcher.overloads))
        return dispatcher

    return decorate


@dataclass(frozen=True)
class ParallelKernel:
    """A kernel whose loops are `prange`s, compiled two ways: on numba's threads, and on the caller's
    thread alone (`serial`): a rank given one thread starts no thread pool (whose launch also resets
    torch's thread count, and whose idle threads spin on a loaded machine) and compiles in a third of the
    time."""

    threaded: Dispatcher
    serial: Dispatcher

    def on(self, threads: int) -> Dispatcher:
        """The compile that runs on `threads` threads."""
        return self.threaded if threads > 1 else self.serial


def parallel_kernel(**options: Any) -> Callable[[Callable[..., Any]], ParallelKernel]:
    """`kernel(parallel=True, **options)`, with its serial twin (`ParallelKernel`), cached apart (the twin's
    name ends in _serial)."""

    def decorate(function: Callable[..., Any]) -> ParallelKernel:
        twin = types.FunctionType(
            function.__code__,
            function.__globals__,
            function.__name__,
            function.__defaults__,
            function.__closure__,
        )
        twin.__qualname__ = f"{function.__qualname__}_serial"
        twin.__module__ = function.__module__
        pair = ParallelKernel(
            cached_dispatcher(function, {**options, "parallel": True}), cached_dispatcher(twin, options)
        )
        used = lambda: bool(pair.threaded.overloads or pair.serial.overloads)  # noqa: E731
        _kernels.setdefault(function.__module__, []).append(used)
        return pair

    return decorate
