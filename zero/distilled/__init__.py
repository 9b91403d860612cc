"""The distilled evaluation: a small, efficiently updatable network learnt from the policy-value network's
judgement, cheap enough for a deep alpha-beta search (its numba kernels, their plain-Python twin, its weights
and file, the torch twin that trains it). Imports zero.rules and zero.run."""
