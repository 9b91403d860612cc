"""Evaluators for tests that count what the search asks of them: a wrapper counting the positions asked of
the evaluator it wraps, and an evaluator on a fake clock."""

from __future__ import annotations

from selfplay.tree_search.evaluators import UniformEvaluator


class Counting:
    def __init__(self, evaluator):
        self.evaluator, self.positions = evaluator, 0

    def evaluate(self, planes):
        self.positions += len(planes)
        return self.evaluator.evaluate(planes)


class ClockedEvaluator:
    """Every network call costs `seconds` of a fake clock (`clock`, for a search that reads time from it);
    calls and the positions sent are counted. All values are even; the policy is uniform, or with
    `favourite` (an action index) puts nearly all the prior on that action wherever it is legal."""

    def __init__(self, seconds: float = 0.01, favourite: int | None = None) -> None:
        self.seconds, self.favourite = seconds, favourite
        self.now, self.calls, self.positions = 0.0, 0, 0
        self.inner = UniformEvaluator((0.3, 0.4, 0.3))

    def clock(self) -> float:
        return self.now

    def evaluate(self, planes):
        self.calls += 1
        self.positions += len(planes)
        self.now += self.seconds
        logits, wdl = self.inner.evaluate(planes)
        if self.favourite is not None:
            logits = logits.copy()
            logits[:, self.favourite] = 8.0
        return logits, wdl
