"""docs/protocol.md is generated from the handler table and must not go stale."""

from pathlib import Path

from samsa.handlers.docs import render

DOC = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"


def test_protocol_doc_is_current() -> None:
    assert DOC.read_text() == render(), "docs/protocol.md is stale: run `make docs`"
