"""docs/protocol.md is generated from the handler table and must not go stale."""

from pathlib import Path

from samsa_dev.protocol_doc import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def test_protocol_doc_is_current() -> None:
    assert DOC.read_text() == render(), "docs/protocol.md is stale: run `make docs`"
