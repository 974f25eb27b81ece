"""cli.jsonstream writes a long list an item at a time, as it is drawn."""

from __future__ import annotations

import gc
import io
import json
from collections.abc import Iterator

from gtool.cli.jsonstream import write_json


def test_items_are_drawn_one_at_a_time_each_written_before_the_next() -> None:
    """The writer draws an item only once the previous one is on the stream: memory holds one item, not
    the list (gtool plan --json of 16,384 ranks took 1.5 GB built whole)."""
    out = io.StringIO()
    seen: list[str] = []

    def items() -> Iterator[dict[str, list[int]]]:
        for n in range(5):
            seen.append(out.getvalue())
            yield {"rank_nnz": list(range(n))}

    write_json({"ranks": 5, "nested": {"a": [1, 2]}, "grids": items(), "after": None}, out)
    assert json.loads(out.getvalue()) == {
        "ranks": 5,
        "nested": {"a": [1, 2]},
        "grids": [{"rank_nnz": list(range(n))} for n in range(5)],
        "after": None,
    }
    for n in range(1, 5):
        assert seen[n].endswith(json.dumps({"rank_nnz": list(range(n - 1))}))
    assert gc.isenabled()


def test_an_empty_iterator_is_an_empty_list() -> None:
    out = io.StringIO()
    write_json({"grids": iter(())}, out)
    assert out.getvalue() == '{\n "grids": []\n}\n' and json.loads(out.getvalue()) == {"grids": []}
