"""When a move's search on the clock may stop before its time is up: once its move can no longer change.

The move a search plays is the first of `selfplay.search.move_order` (a proven win, else the most visited
move). Visits only grow, and the rest of the time buys a bounded number of them, so once no other move could
reach the leader's visits even if every simulation left went to it, the time left would buy nothing. The
simulations left are estimated from the rate this search has measured so far, with a margin. (A move
proven lost later, or another proven a win, could still change the choice; a proven root or a proven
winning move ends the search by itself.) `selfplay.analysis.GameSearch.choose` asks this after every step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from selfplay.search import RootChildren, move_order
from zero.config import check_settings, setting


@dataclass(frozen=True)
class TimeManager:
    """How a search on the clock judges the time it has left."""

    # The simulations the time left can still buy are taken as this many times what the rate measured so
    # far in the search predicts: the rate varies (the position cache warms up, batches ending early on
    # leaves already in flight), and stopping a search whose move would have changed costs strength, while
    # searching on costs only time.
    rate_margin: float = setting(1.5, low=1)

    def validate(self) -> None:
        check_settings(self, "time manager")

    def simulations_left(self, searched: int, elapsed: float, left: float) -> float:
        """The simulations the `left` seconds can still buy, after `searched` simulations in `elapsed`
        seconds: infinite while nothing is measured yet."""
        if elapsed <= 0 or searched <= 0:
            return math.inf
        return self.rate_margin * searched / elapsed * max(left, 0.0)


def decided(children: RootChildren, simulations_left: float) -> bool:
    """Whether the root's move (the first of move_order) can no longer change with `simulations_left` more
    simulations: no other move not proven lost, given them all, would reach its visits."""
    order = move_order(children.visits, children.prior, children.proven, children.proven_plies)
    rivals = order[1:][children.proven[order[1:]] != -1]
    if not len(rivals):
        return True
    return float(np.max(children.visits[rivals])) + simulations_left < float(children.visits[order[0]])
