"""`python -m samsa.cli` is the samsa command."""

import sys

# kio registers Hypothesis strategies for its types whenever Hypothesis is importable (in a
# development environment), which costs a broker process over half a second of CPU at start.
sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]

from samsa.cli.main import main  # noqa: E402

main()
