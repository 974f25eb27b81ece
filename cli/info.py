"""`gtool info STORE`: a store's metadata."""

from __future__ import annotations

import json

import typer
from rich.table import Table

from .common import out, reports_errors


@reports_errors
def info(
    store: str = typer.Argument(..., help="Store path or fsspec URL."),
    as_json: bool = typer.Option(False, "--json", help="Print the metadata as JSON."),
) -> None:
    """Print a store's metadata (refuses incomplete or unknown stores)."""

    from gtool.store.reader import open_store

    meta = open_store(store).meta.to_dict()
    if as_json:
        typer.echo(json.dumps(meta, indent=2))
        return
    table = Table(title=f"gtool store {store}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for key, value in meta.items():
        if key == "stats":
            for m, st in value.items():
                table.add_row(
                    f"stats A{m}",
                    f"tile nnz min {st['min']:,} max {st['max']:,} mean {st['mean']:,.1f} "
                    f"max/mean {st['max_over_mean']:.3f} cv {st['cv']:.3f} empty {st['empty']}",
                )
        else:
            table.add_row(key, json.dumps(value) if isinstance(value, dict | list) else str(value))
    out.print(table)
