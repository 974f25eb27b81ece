"""Text edge files (plain or gzipped) read as byte ranges that start at line starts.

A plain file is cut into byte ranges aligned to line starts, which workers read in parallel. Gzip cannot be
split: `TextFile.prepare(workdir)` decompresses it once, streaming, into workdir, and the ranges then cut
that copy. Line numbers in messages are counted only when an error is raised.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import shutil
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

import numpy as np

from gtool.errors import InputError
from gtool.preprocess.sources.base import EdgeBlock, EdgeChunk
from gtool.preprocess.sources.cache.entries import work_copy
from gtool.preprocess.sources.fileinfo import (
    COPY_BYTES,
    MIB,
    FileSource,
    check_readable,
)
from gtool.preprocess.sources.text.parse import (
    FAST_PATH_ERRORS,
    data_lines,
    edge_line_check,
    find_bad_line,
    is_header,
    line_of_row,
    normalize,
    read_columns,
)

GZIP_MAGIC = b"\x1f\x8b"
LONE_CARRIAGE_RETURN = re.compile(rb"\r(?!\n|$)")
NEWLINE = ord("\n")
BLANK = np.zeros(256, dtype=bool)
BLANK[list(b" \t\r\v\f,")] = True
COMMENT_START = np.zeros(256, dtype=bool)
COMMENT_START[list(b"#%")] = True
NOT_DATA_START = BLANK | COMMENT_START
NOT_DATA_START[NEWLINE] = True
SCAN_BYTES = 64 * 1024
ID_DTYPE = np.dtype(np.int64)
WEIGHT_DTYPE = np.dtype(np.float64)


@contextmanager
def gzip_errors(where: str) -> Iterator[None]:
    """Turn failures of a broken gzip stream into an InputError naming the file."""
    try:
        yield
    except EOFError:
        raise InputError(where, "truncated gzip: the compressed data ended early (re-download it)") from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(where, f"corrupt gzip data ({exc})") from None


LONE_CR_ENDS = "lines end in a lone carriage return (\\r); expected \\n or \\r\\n line ends"


def refuse_lone_carriage_return(path: str, text: bytes) -> None:
    """Fail when `text` (a line as read up to a newline) holds a lone carriage return: such a file's lines
    would read as one."""
    if LONE_CARRIAGE_RETURN.search(text):
        raise InputError(path, LONE_CR_ENDS)


def has_lone_carriage_return(path: str, start: int) -> bool:
    """Whether bytes from `start` on hold a lone carriage return, read in bounded pieces (one that ends a
    piece is judged with the next)."""
    with open(path, "rb") as f:
        f.seek(start)
        carry = b""
        for piece in iter(lambda: f.read(COPY_BYTES), b""):
            if LONE_CARRIAGE_RETURN.search(carry + piece):
                return True
            carry = piece[-1:] if piece.endswith(b"\r") else b""
    return False


def count_newlines(path: str, end: int) -> int:
    """Number of newlines in bytes [0, end) of a file, read in bounded pieces."""
    count = 0
    with open(path, "rb") as f:
        while f.tell() < end:
            piece = f.read(min(COPY_BYTES, end - f.tell()))
            if not piece:
                break
            count += piece.count(b"\n")
    return count


def count_data_lines(path: str, start: int) -> int:
    """Lines from byte `start` on that hold data (a token before any '#'/'%' comment), as the parsers read
    them; counted over bounded pieces without splitting lines."""
    count, at_line_start = 0, True
    with open(path, "rb") as f:
        f.seek(start)
        for piece in iter(lambda: f.read(COPY_BYTES), b""):
            found, at_line_start = piece_data_lines(piece, at_line_start)
            count += found
    return count


def piece_data_lines(piece: bytes, at_line_start: bool) -> tuple[int, bool]:
    """(data lines that start in `piece`, whether the next piece starts a line). When the piece holds no
    comment and every line in it starts with a token, its line starts are its data lines; otherwise each
    line's first non-blank character decides."""
    chars = np.frombuffer(piece, dtype=np.uint8)
    if b"%" not in piece and b"#" not in piece:
        starts = np.flatnonzero(chars[:-1] == NEWLINE) + 1
        leads = chars[starts]
        if not NOT_DATA_START[leads].any() and not (at_line_start and NOT_DATA_START[chars[0]]):
            return int(at_line_start) + starts.size, bool(chars[-1] == NEWLINE)
    chars = chars[~BLANK[chars]]
    if not chars.size:
        return 0, at_line_start
    first = np.empty(chars.size, dtype=bool)
    first[0] = at_line_start
    np.equal(chars[:-1], NEWLINE, out=first[1:])
    found = int(np.count_nonzero(first & (chars != NEWLINE) & ~COMMENT_START[chars]))
    return found, bool(chars[-1] == NEWLINE)


def next_line_start(f: IO[bytes], pos: int) -> int:
    """The first offset >= pos at which a line starts (or the file size)."""
    if pos == 0:
        return 0
    f.seek(pos - 1)
    while True:
        piece = f.read(SCAN_BYTES)
        if not piece:
            return f.tell()
        newline = piece.find(b"\n")
        if newline >= 0:
            return f.tell() - len(piece) + newline + 1


def mean_line_bytes(path: str, start: int) -> float:
    """Average line length in the first MiB after `start` (for sizing chunks)."""
    with open(path, "rb") as f:
        f.seek(start)
        sample = f.read(MIB)
    return len(sample) / max(1, sample.count(b"\n"))


class TextFile:
    """A text file, maybe gzipped, read through its plain (decompressed) content."""

    def __init__(self, path: str):
        check_readable(path)
        self.path = path
        with open(path, "rb") as f:
            magic = f.read(len(GZIP_MAGIC))
        self.gzipped = path.lower().endswith(".gz") or magic == GZIP_MAGIC
        self.plain_path = None if self.gzipped else path

    @property
    def compression(self) -> str | None:
        """'gzip' or None, for descriptions."""
        return "gzip" if self.gzipped else None

    def open_content(self) -> io.BufferedIOBase:
        """The file opened for reading its (decompressed) content sequentially."""
        return gzip.open(self.path) if self.gzipped else open(self.path, "rb")

    @contextmanager
    def stream(self) -> Iterator[io.BufferedIOBase]:
        """The (decompressed) content as a sequential stream; gzip failures become InputErrors."""
        with gzip_errors(self.path), self.open_content() as f:
            yield f

    def prepare(self, workdir: str) -> None:
        """Decompress a gzipped file once, streaming, into workdir (kept for reruns)."""
        if self.plain_path is None:
            self.plain_path = work_copy(workdir, self.path, ".plain", self.gunzip)

    def gunzip(self, out: IO[bytes]) -> None:
        """Stream the decompressed content into `out`."""
        with self.stream() as f:
            shutil.copyfileobj(f, out, COPY_BYTES)

    def plain(self) -> str:
        """Path of the plain content (a gzipped file must be prepared first)."""
        if self.plain_path is None:
            raise RuntimeError(f"{self.path} is gzipped: call prepare(workdir) before edge_chunks()")
        return self.plain_path

    def first_data_tokens(self) -> list[bytes]:
        """Tokens of the first non-blank, non-comment line ([] if there is none); lines that end in a lone
        carriage return (classic Mac OS) are refused, since the file would read as one line."""
        with self.stream() as f:
            for line in iter(lambda: f.readline(MIB), b""):
                refuse_lone_carriage_return(self.path, line)
                tokens = normalize(line).split()
                if tokens:
                    return tokens
        return []

    def ranges(self, start: int, edges_per_chunk: int) -> list[tuple[int, int]]:
        """Byte ranges of the plain content from `start`, each starting at a line start, of about
        `edges_per_chunk` lines; at least one range even when there are no lines."""
        path = self.plain()
        size = os.path.getsize(path)
        step = max(1, int(edges_per_chunk * mean_line_bytes(path, start)))
        cuts = [start]
        with open(path, "rb") as f:
            for nominal in range(start + step, size, step):
                if nominal > cuts[-1]:
                    cut = next_line_start(f, nominal)
                    if cuts[-1] < cut < size:
                        cuts.append(cut)
        cuts.append(max(size, start))
        return list(zip(cuts[:-1], cuts[1:], strict=True))


class TextFileSource(FileSource):
    """The part of the text sources (edge lists, Matrix Market) that handles the file itself."""

    def __init__(self, path: str, num_nodes: int | None):
        super().__init__(path, num_nodes)
        self.file = TextFile(path)

    def prepare(self, workdir: str) -> None:
        self.file.prepare(workdir)


@dataclass(frozen=True)
class TextChunk(EdgeChunk):
    """Lines in bytes [start, end) of plain text file `path`; `where` is the file the user named."""

    path: str
    where: str
    start: int
    end: int
    weighted: bool

    def read_text(self) -> bytes:
        """The chunk's bytes, normalized for parsing."""
        with open(self.path, "rb") as f:
            f.seek(self.start)
            return normalize(f.read(self.end - self.start))

    def first_line(self) -> int:
        """1-based file line number of the chunk's first line."""
        return count_newlines(self.path, self.start) + 1

    def read(self) -> EdgeBlock:
        data = self.read_text()
        dtypes = [ID_DTYPE, ID_DTYPE, WEIGHT_DTYPE] if self.weighted else [ID_DTYPE, ID_DTYPE]
        try:
            columns = read_columns(data, dtypes)
        except FAST_PATH_ERRORS as exc:
            raise self.syntax_error(data, str(exc)) from None
        if self.weighted and not np.isfinite(columns[2]).all():
            raise self.syntax_error(data, "non-finite weight")
        return EdgeBlock(columns[0], columns[1], self.where, locate=TextLocator(self))

    def syntax_error(self, data: bytes, fast_path_message: str) -> InputError:
        """An InputError naming the first bad line of the chunk and what is wrong with it."""
        bad = find_bad_line(data, edge_line_check(self.weighted))
        if bad is None:
            return InputError(self.where, f"cannot parse bytes {self.start}-{self.end}: {fast_path_message}")
        index, problem = bad
        first, tokens = next(data_lines(data))
        if self.start == 0 and index == first and is_header(tokens):
            problem += " (a header line? make it a comment: start it with '#')"
        return InputError(self.where, problem, line=self.first_line() + index)


@dataclass(frozen=True)
class TextLocator:
    """Maps edge k of a text chunk's block to its 1-based file line (counted on demand)."""

    chunk: TextChunk

    def __call__(self, k: int) -> tuple[int | None, str | None]:
        return self.chunk.first_line() + line_of_row(self.chunk.read_text(), k), None
