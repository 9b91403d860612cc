"""The yardstick players: random, material alpha-beta and the classical engine (numba kernels and their readable
twin). Imports zero.endgames, zero.rules and zero.run."""
