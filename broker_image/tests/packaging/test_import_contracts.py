"""The import-linter contracts (.importlinter, run by make lint) cover the whole broker: every
package and top-level module of `samsa` sits in a layer, so none escapes the layering, and the
shipped packages are forbidden the development tooling."""

from __future__ import annotations

import configparser
import pkgutil
import re
from pathlib import Path

import samsa

ROOT = Path(__file__).resolve().parents[3]


def _contracts() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    return config


def test_every_package_of_the_broker_is_in_a_layer() -> None:
    layers = _contracts()["importlinter:contract:layers"]["layers"]
    # Siblings of a layer are split by | (independent) or : (may import each other).
    layered = {n.strip() for line in layers.splitlines() for n in re.split("[|:]", line)} - {""}
    modules = {f"samsa.{m.name}" for m in pkgutil.iter_modules(samsa.__path__)}
    assert modules - layered == set()
    assert layered - modules == set()


def test_what_ships_is_forbidden_the_development_tooling() -> None:
    contract = _contracts()["importlinter:contract:no-devtools"]
    assert contract["type"] == "forbidden"
    assert {"samsa", "samsa_operator", "samsa_spark"} <= set(contract["source_modules"].split())
    assert contract["forbidden_modules"].split() == ["samsa_dev"]
