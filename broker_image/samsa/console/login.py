"""The console's own login: HTTP basic auth against users from a file of `user:password` lines
or from the SAMSA_CONSOLE_USER / SAMSA_CONSOLE_PASSWORD environment variables. Pure."""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Mapping
from pathlib import Path

PASSWORD_ENV = "SAMSA_CONSOLE_PASSWORD"
USER_ENV = "SAMSA_CONSOLE_USER"
DEFAULT_USER = "admin"


def parse_users(text: str, source: str) -> dict[str, str]:
    """`user:password` a line; blank lines and lines starting with # are skipped."""
    users = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, password = line.partition(":")
        if not sep or not user or not password:
            raise ValueError(f"{source}, line {number}: expected user:password")
        users[user] = password
    return users


def load_users(users_file: Path | None, env: Mapping[str, str]) -> dict[str, str]:
    """Who may log in; empty when neither the file nor the environment names anyone (no login)."""
    users = {}
    if users_file is not None:
        users.update(parse_users(users_file.read_text(), str(users_file)))
    if env.get(PASSWORD_ENV):
        users[env.get(USER_ENV) or DEFAULT_USER] = env[PASSWORD_ENV]
    return users


def authorized(header: str | None, users: Mapping[str, str]) -> bool:
    """Whether an Authorization header names a known user with the right password."""
    if not users:
        return True
    if not header or not header.startswith("Basic "):
        return False
    try:
        decoded = base64.b64decode(header[6:], validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return False
    user, _, password = decoded.partition(":")
    expected = users.get(user)
    # Constant time, so the answer's timing does not tell how much of a password was right.
    return expected is not None and hmac.compare_digest(expected.encode(), password.encode())
