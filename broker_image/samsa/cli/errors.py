"""One-line errors for people: a message on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import sys
from typing import NoReturn

import typer


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)
