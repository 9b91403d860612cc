"""The `checkers-zero` subcommands of this layer: perft, pdn, egdb. Imports the rest of zero."""
