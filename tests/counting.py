"""An evaluator wrapper that counts the positions asked of the evaluator it wraps."""

from __future__ import annotations


class Counting:
    def __init__(self, evaluator):
        self.evaluator, self.positions = evaluator, 0

    def evaluate(self, planes):
        self.positions += len(planes)
        return self.evaluator.evaluate(planes)
