"""The alpha-beta search: its numba kernels (negamax PVS with a transposition table, move ordering, selectivity,
quiescence and endgame-database leaves), the evaluations it scores its leaves with (the classical features'
kernels, the distilled network's of zero.distilled), their plain-Python twin, and the player that searches with
them (to a fixed depth or on the clock, with the opening book and the endgame database). Imports zero.corpus,
zero.distilled, zero.endgames, zero.rules and zero.run."""
