"""Fixtures of the console's tests."""

from console_support import start_console

__all__ = ["start_console"]
