"""`python -m samsa_dev`: the same as the `samsa-dev` command."""

from samsa_dev.cli import main

main()
