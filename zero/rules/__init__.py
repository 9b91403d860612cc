"""The rules of English checkers: bitboards, the numba move generator, positions and games, move and FEN notation,
perft, the plain-Python twin of the rules, and the player interface (what picks a game's moves). Imports
zero.run."""
