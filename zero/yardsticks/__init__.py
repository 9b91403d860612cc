"""The yardstick players: random, material alpha-beta and the classical engine (the alpha-beta search of
zero.alphabeta with the classical evaluation's fitted weights file). Imports zero.alphabeta, zero.endgames,
zero.rules and zero.run."""
