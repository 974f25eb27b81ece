"""JSON written as it is made: a long list in a report is encoded and written an item at a time."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator, Mapping
from typing import Any, TextIO


def write_json(document: Mapping[str, Any], out: TextIO) -> None:
    """Write `document` as one JSON object, a member per line; a member whose value is an iterator
    becomes a list whose items are drawn, encoded and written one at a time, one per line, so that
    memory holds one item however long the list (`gtool plan --json`: one grid per item). The garbage
    collector is paused meanwhile: the items' many small lists hold no cycles, and its passes over them
    took nine tenths of the time."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        _write(document, out)
    finally:
        if collecting:
            gc.enable()


def _write(document: Mapping[str, Any], out: TextIO) -> None:
    out.write("{")
    for n, (key, value) in enumerate(document.items()):
        out.write(("," if n else "") + f"\n {json.dumps(key)}: ")
        if not isinstance(value, Iterator):
            out.write(json.dumps(value))
            continue
        out.write("[")
        items = 0
        for item in value:
            out.write(("," if items else "") + f"\n  {json.dumps(item)}")
            items += 1
        out.write("\n ]" if items else "]")
    out.write("\n}\n")
