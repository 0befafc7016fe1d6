"""One-line errors for people: a message on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import sys
from typing import NoReturn

import typer


class Failure(typer.Exit):
    """The exit `fail` raises: it keeps the message, for callers that show it elsewhere (the
    web console renders it as an error page instead of ending the process)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(code)
        self.message = message


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise Failure(message, code)


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)
