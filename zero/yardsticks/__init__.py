"""The alpha-beta players: the yardsticks (random, material alpha-beta, the classical engine) and the one
alpha-beta search with its two evaluations, the classical one and the distilled network (numba kernels and
their readable twin). Imports zero.corpus, zero.distilled, zero.endgames, zero.rules and zero.run."""
