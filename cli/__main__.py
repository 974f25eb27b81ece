"""`python -m gtool.cli` runs the gtool command."""

from gtool.cli.main import program

program()
