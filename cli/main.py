"""`gtool`: the command line over preprocess, stats, loader and trainer."""

from __future__ import annotations

import typer

from gtool.cli.cache import app as cache_app
from gtool.cli.common import run
from gtool.cli.help import App
from gtool.cli.info import info
from gtool.cli.plan import plan
from gtool.cli.predict import predict
from gtool.cli.shard import shard
from gtool.cli.stats import stats
from gtool.cli.train import train
from gtool.cli.verify import verify
from gtool.trainer import enable_huge_pages
from gtool.version import __version__

app = App(
    name="gtool",
    help="Turn large graphs into 2D-tiled Zarr stores and train 3D-parallel GCNs on them.",
    no_args_is_help=True,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gtool {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """gtool: out-of-core graph sharding and 3D-parallel GCN training."""
    enable_huge_pages()  # before any command imports torch; ranks it starts inherit the setting


app.command("shard")(shard)
app.command("info")(info)
app.command("stats")(stats)
app.command("train")(train)
app.command("predict")(predict)
app.command("verify")(verify)
app.command("plan")(plan)
app.add_typer(cache_app, name="cache")


def program() -> None:
    """The `gtool` program (its console script, `python -m gtool.cli`)."""
    run(app)
