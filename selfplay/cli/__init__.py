"""The `checkers-zero` subcommands of this layer: selfplay, replay. Imports the rest of selfplay and zero."""
