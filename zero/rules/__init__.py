"""The rules of English checkers: bitboards, the numba move generator, positions and games, move and FEN notation,
perft, and the plain-Python twin of the rules. Imports zero.run."""
