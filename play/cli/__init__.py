"""The `checkers-zero` console script (main) and this layer's subcommands: play, serve, analyze, engine, review.
The top of the house: imports every layer."""
