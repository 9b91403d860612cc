"""The `checkers-zero` subcommands of this layer: pretrain, loop, match, ship, tune, classical, ratings, report.
Imports the rest of train, selfplay and zero."""
