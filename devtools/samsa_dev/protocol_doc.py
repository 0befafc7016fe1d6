"""Renders docs/protocol.md from the handler table, so the document cannot drift from the code.

python -m samsa_dev.protocol_doc > docs/protocol.md
"""

from __future__ import annotations

import textwrap

from samsa.handlers.registry import default_apis
from samsa_dev.differences import DIFFERENCES


def render() -> str:
    lines = [
        "# Kafka protocol support",
        "",
        "Generated from the broker's handler table by `make docs`; a test fails when it is stale.",
        "ApiVersions advertises exactly these ranges.",
        "",
        "| API key | API | versions | what it does |",
        "|---:|---|---|---|",
    ]
    for api in default_apis():
        note = api.notes.split(":", 1)[1].strip() if ":" in api.notes else api.notes
        lines.append(f"| {api.key} | {api.name} | {api.min_version}-{api.max_version} | {note} |")
    lines += ["", "## Where Samsa differs from Apache Kafka", ""]
    for d in DIFFERENCES:
        text = f"**{d.what}** ({d.api}) {d.why}"
        lines += textwrap.wrap(text, 95, initial_indent="- ", subsequent_indent="  ")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
