"""How a search on the clock spends its time: when it may stop before its time is up, when it should think
on past it, and how a game clock with an increment is split into moves.

Stopping early: once its move can no longer change.

The move a search plays is the first of `selfplay.tree_search.search.move_order` (a proven win, else the most visited
move). Visits only grow, and the rest of the time buys a bounded number of them, so once no other move could
reach the leader's visits even if every simulation left went to it, the time left would buy nothing. The
simulations left are estimated from the rate this search has measured so far, with a margin. (A move
proven lost later, or another proven a win, could still change the choice; a proven root or a proven
winning move ends the search by itself.) `selfplay.tree_search.analysis.GameSearch.choose` asks this after every step.

Thinking on: a player on a game clock (`GameClock`) aims at a target time a move and may go on to a most
(`TimeManager.move_time`); at the target it stops unless its choice is unstable (`Instability`): the move it
would play changed late in the search, or the position's value fell well below what the player's previous
search found. The time saved by early stops and forced moves stays on the clock and pays for these.

`MoveTimer` applies these rules to a search, step by step: `selfplay.tree_search.analysis.GameSearch` for a game
searched alone, `play.analysis_pool` for the engine's queries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from selfplay.tree_search.search import BatchedSearch, RootChildren, move_order
from zero.run.config import check_settings, setting


@dataclass(frozen=True)
class TimeManager:
    """How a search on the clock judges the time it has left."""

    # The simulations the time left can still buy are taken as this many times what the rate measured so
    # far in the search predicts: the rate varies (the position cache warms up, batches ending early on
    # leaves already in flight), and stopping a search whose move would have changed costs strength, while
    # searching on costs only time.
    rate_margin: float = setting(1.5, low=1)
    # A move on a game clock aims at the increment plus this share of the time banked (what earlier moves
    # saved): the bank is spread as if this many moves were left, which keeps a reserve for the critical
    # moves the game has not reached yet. 10 rather than 20 spends what the book's moves bank in the early
    # middlegame, before exchanges bring the database near (benchmarks/clock_use.py, 2026-12-05).
    moves_to_go: float = setting(10.0, low=1)
    # ... but over no more moves than are left before an endgame database plays the game on, at once and
    # for no time: estimated as this many of the player's moves a piece above the database's size. Over
    # OCA's games the median is 1.0-1.3 (a sixth of them trade two pieces in one exchange); 0.5 spends
    # early rather than carry a bank into the database, where it is never spent: with 1.0 the whole player
    # took a median 0.17 s (p90 0.51 s) into it at 0.1 s a move, with 0.5 (and moves_to_go 10) 0.14 s
    # (p90 0.33 s).
    moves_a_piece: float = setting(0.5, low=0.1)
    # An unstable search may think on to this many times its target...
    extension: float = setting(3.0, low=1)
    # ... but never spends more than the increment and this share of the bank on one move.
    most_of_bank: float = setting(0.3, low=0, high=1)
    # A move plans to leave this share of what its clock holds unspent, for what a search overruns its time by
    # (its last step or network call, a slower stretch of an alpha-beta iteration, a loaded machine): planned
    # to the clock's last millisecond, 5.5 % of the whole player's moves left it below zero (a real clock's
    # flag would fall) over the 0.1 s ballot (benchmarks/clock_use.py, 2026-12-05).
    reserve: float = setting(0.1, low=0, high=0.9)
    # The choice is unstable when the move to play changed within this last share of the search's
    # simulations...
    unstable_share: float = setting(0.25, low=0, high=1)
    # ... or when the root's value (in [-1, 1], for the side to move) fell this much below the value the
    # player's previous search found.
    value_drop: float = setting(0.1, low=0, high=2)

    def validate(self) -> None:
        check_settings(self, "time manager")

    def simulations_left(self, searched: int, elapsed: float, left: float) -> float:
        """The simulations the `left` seconds can still buy, after `searched` simulations in `elapsed`
        seconds: infinite while nothing is measured yet."""
        if elapsed <= 0 or searched <= 0:
            return math.inf
        return self.rate_margin * searched / elapsed * max(left, 0.0)


# The settings that act only on a game clock (the rest, rate_margin, also stops a search of a budget a move).
GAME_CLOCK_SETTINGS = ("moves_to_go", "moves_a_piece", "extension", "most_of_bank", "reserve", "unstable_share",
                       "value_drop")


def decided(children: RootChildren, simulations_left: float) -> bool:
    """Whether the root's move (the first of move_order) can no longer change with `simulations_left` more
    simulations: no other move not proven lost, given them all, would reach its visits."""
    order = move_order(children.visits, children.prior, children.proven, children.proven_plies)
    rivals = order[1:][children.proven[order[1:]] != -1]
    if not len(rivals):
        return True
    return float(np.max(children.visits[rivals])) + simulations_left < float(children.visits[order[0]])


@dataclass(frozen=True)
class GameClock:
    """A game clock: `base` seconds at the start, and `increment` seconds added at each of the player's moves,
    before it is played (so that base 0 and increment 0.1 is "0.1 s a move on average": what a move saves
    stays on the clock for later ones). A search may overrun its time by one network call; the clock keeps
    the overrun (a negative bank) and later moves pay it back, so no move loses on time."""

    base: float
    increment: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.base) and math.isfinite(self.increment)) or self.base < 0 or \
                self.increment < 0 or self.base + self.increment <= 0:
            raise ValueError(f"a game clock needs a base and an increment of seconds, finite, not negative "
                             f"and not both 0, got {self.base:g}+{self.increment:g}")

    def __str__(self) -> str:
        return f"{self.base:g}+{self.increment:g}"

    @classmethod
    def parse(cls, text: str) -> "GameClock":
        """`BASE+INCREMENT` in seconds, e.g. `60+0.5` or `0+0.1`; a ValueError names what is wrong."""
        base, plus, increment = text.partition("+")
        try:
            seconds = float(base), float(increment)
        except ValueError:
            seconds = None
        if not plus or seconds is None:
            raise ValueError(f"a game clock is BASE+INCREMENT in seconds, e.g. 0+0.1, got {text!r}")
        return cls(*seconds)


@dataclass(frozen=True)
class MoveTime:
    """A move's time on a game clock: the search aims at `target` seconds, and may think on to `most` while
    its choice is unstable."""

    target: float
    most: float


def move_time(manager: TimeManager, increment: float, bank: float,
              pieces_above_database: int | None = None) -> MoveTime:
    """The time of the next move on a clock with this `increment` a move and `bank` seconds on it before the
    move's increment (what earlier moves left; negative after an overrun), for a player whose endgame
    database holds positions of this many pieces fewer than the board's (None: no database). Neither time
    is more than the clock holds less its `reserve`: a debt (a clock left below zero by an overrun, which a
    real clock would have lost on) leaves the move one step of search."""
    spread = manager.moves_to_go
    if pieces_above_database is not None:
        spread = max(min(spread, manager.moves_a_piece * pieces_above_database), 1.0)
    ceiling = max((1.0 - manager.reserve) * (increment + bank), 0.0)
    target = min(max(increment + bank / spread, 0.0), ceiling)
    most = min(max(min(manager.extension * target, increment + manager.most_of_bank * bank), target), ceiling)
    return MoveTime(target, most)


class Instability:
    """Whether a search's choice is still settling: the move it would play changed within the last
    `unstable_share` of its simulations, or its root value fell `value_drop` below the player's previous
    search's. Fed the root after each step of the search."""

    def __init__(self, manager: TimeManager, previous_value: float | None) -> None:
        self.manager = manager
        self.previous_value = previous_value
        self.leader: int | None = None
        self.changed_at = 0  # the simulations searched when the leader last changed

    def observe(self, children: RootChildren, searched: int) -> None:
        if not len(children.visits):
            return
        leader = int(move_order(children.visits, children.prior, children.proven, children.proven_plies)[0])
        if leader != self.leader:
            self.leader, self.changed_at = leader, searched

    def unstable(self, searched: int, value: float) -> bool:
        late = self.changed_at > (1.0 - self.manager.unstable_share) * searched
        dropped = self.previous_value is not None and value < self.previous_value - self.manager.value_drop
        return late or dropped


class MoveTimer:
    """When a search for time ends, asked after each of its steps: at `seconds`; a search for a move on the
    clock (`stop_early`) also as soon as its move can no longer change (`decided`), and with `most_seconds`
    above `seconds` (a game clock's move) it thinks on past `seconds`, up to `most_seconds`, while its
    choice is unstable (`Instability`, against `previous_value`, the player's last search's root value).
    `kept`: the root's visits when the search began (a subtree kept from earlier moves), which neither the
    rate nor the instability counts; `limit`: a budget of root visits that also ends the search."""

    def __init__(self, manager: TimeManager, started: float, seconds: float | None, *, stop_early: bool = False,
                 most_seconds: float | None = None, previous_value: float | None = None, kept: int = 0,
                 limit: float = math.inf) -> None:
        self.manager = manager
        self.started = started
        self.deadline = started + seconds if seconds is not None else math.inf
        # Only a search that may stop early (a move to play) thinks on past its time.
        self.last_deadline = max(self.deadline, started + most_seconds) \
            if stop_early and most_seconds is not None else self.deadline
        self.stop_early = stop_early
        self.instability = Instability(manager, previous_value)
        self.kept = kept
        self.limit = limit

    def done(self, search: BatchedSearch, g: int, now: float) -> bool:
        """Whether tree `g`'s search should end at `now`, after a step."""
        visits = search.root_visits(g)
        searched = visits - self.kept
        children = search.root_children(g) if self.last_deadline > self.deadline else None  # for both rules
        if children is not None:
            self.instability.observe(children, searched)
        if now >= self.deadline and (now >= self.last_deadline or
                                     not self.instability.unstable(searched, search.root_value(g))):
            return True
        if not self.stop_early:
            return False
        # Before the target, the time to it is what is left; past it, an unstable search's time.
        end = self.deadline if now < self.deadline else self.last_deadline
        left = min(self.manager.simulations_left(searched, now - self.started, end - now), self.limit - visits)
        # No move has more visits than the root, so while the time left buys that many the move can still
        # change, and the root's children (a copy of them each step) need not be read.
        if left >= visits:
            return False
        return decided(children if children is not None else search.root_children(g), left)
