"""Turn a SOURCE argument into a GraphSource: generator, existing directory or file, else a dataset name
(Planetoid or OGB).

Readers are imported only for the kind of source named: the file readers pull in pandas and pyarrow,
about 75 MB that a generator run (and its memory budget) should not pay for.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from gtool.errors import GtoolError, InputError
from gtool.preprocess.options import ShardOptions
from gtool.preprocess.sources.base import GraphSource
from gtool.preprocess.sources.generators import parse_generator
from gtool.preprocess.sources.kinds import SOURCE_KINDS

WHAT_SOURCE_IS = f"SOURCE is {SOURCE_KINDS}"


def is_planetoid_dir(path: Path) -> bool:
    return any(path.glob("ind.*.graph"))


def resolve_source(spec: str, options: ShardOptions) -> GraphSource:
    """The source a user named, or an InputError saying what SOURCE may be."""
    if not spec.strip():
        raise GtoolError(f"SOURCE is empty ({spec!r}: an unset variable?); {WHAT_SOURCE_IS}")
    generated = parse_generator(spec)
    if generated is not None:
        return generated
    path = Path(spec)
    if path.is_dir() and is_planetoid_dir(path):
        from gtool.preprocess.sources.planetoid.source import open_planetoid

        return open_planetoid(str(path))
    if path.is_file():
        from gtool.preprocess.sources.edgefiles import open_edge_file

        return open_edge_file(str(path), options.num_nodes)
    from gtool.preprocess.sources.dataroot import default_root
    from gtool.preprocess.sources.planetoid.download import fetch_planetoid, planetoid_name

    name = planetoid_name(spec)
    if name is not None and not path.exists():
        from gtool.preprocess.sources.planetoid.source import open_planetoid

        return open_planetoid(str(fetch_planetoid(name, options.root or default_root(), options.progress)))
    from gtool.preprocess.sources.ogb.layout import known_dataset
    from gtool.preprocess.sources.ogb.source import open_ogb

    if path.is_dir() or known_dataset(spec) is not None:
        return open_ogb(spec, options.root, keep_direction=options.directed)
    raise InputError(
        spec, f"no such file or directory, and not a source name{close_name(spec)}; {WHAT_SOURCE_IS}"
    )


def close_name(spec: str) -> str:
    """' (did you mean NAME?)' with the dataset name nearest to a mistyped one (papers100, arxv), else ''."""
    from gtool.preprocess.sources.ogb.layout import master_rows, short_name
    from gtool.preprocess.sources.planetoid.download import NAMES

    if not re.fullmatch(r"[\w-]+", spec):
        return ""
    names = [*NAMES, *(short_name(name) for name in master_rows()[""])]
    close = difflib.get_close_matches(short_name(spec), names, n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""
