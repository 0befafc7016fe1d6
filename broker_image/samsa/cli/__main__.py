"""`python -m samsa.cli` is the samsa command."""

from samsa.cli.main import main

main()
