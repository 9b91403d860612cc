"""The search: PUCT kernels over many trees (numba) and their plain-Python twin, the batched driver, the
network-answer cache, the Gumbel root, single-game analysis, the time manager. Imports zero."""
