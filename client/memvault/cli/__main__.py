"""`python -m memvault.cli`: the `memvault` command."""

from memvault.cli.main import main

main()
