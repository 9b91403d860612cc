"""Matches played in lockstep, so that network players batch their evaluations across games.

`zero.match.play_match` plays one game after another, which leaves a network evaluating one leaf at a time.
Here up to `parallel` games of the same ballot schedule run at once: every network player owns one
`BatchedSearch` with a tree per game slot, searches the slots where it is to move, and evaluates all their
leaves in one batch. Plain players (random, alpha-beta) move as soon as it is their turn. The result is the
same `zero.match.MatchResult` as a sequential match, so statistics, PDN output and ratings code are shared.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from selfplay.evaluators import PositionEvaluator
from selfplay.search import BatchedSearch, SearchConfig, sample_by_visits
from zero.game import Game, Move, RulesConfig, Termination
from zero.match import DEFAULT_MAX_PLIES, GameRecord, MatchResult, Opening, match_schedule, mix_seed, start_game
from zero.players import Player


@dataclass
class NetworkPlayer:
    """A network with a fixed search budget: no noise (the arena never mixes any in), most visited move."""

    name: str
    evaluator: PositionEvaluator
    simulations: int
    config: SearchConfig = field(default_factory=SearchConfig)


@dataclass
class _Slot:
    schedule_index: int
    opening_index: int
    a_black: bool
    game: Game
    seed: int
    searching: bool = False


ArenaPlayer = NetworkPlayer | Player


def play_lockstep_match(
    a: ArenaPlayer,
    b: ArenaPlayer,
    openings: Sequence[Opening],
    rules: RulesConfig = RulesConfig(),
    max_plies: int = DEFAULT_MAX_PLIES,
    seed: int = 0,
    games: int | None = None,
    parallel: int = 32,
    on_game: Callable[[GameRecord, MatchResult], None] | None = None,
    should_stop: Callable[[MatchResult], bool] | None = None,
    progress: bool = False,
) -> MatchResult:
    """Play the ballot schedule of zero.match (each opening with A as Black, then as White).

    on_game(record, result_so_far) runs after each finished game; should_stop(result) is asked after each
    one and ends the match early (games still in flight are dropped and not counted).
    """
    schedule = match_schedule(openings, games)
    result = MatchResult(a.name, b.name)
    searches = {
        id(p): BatchedSearch(parallel, p.config, rules)
        for p in (a, b) if isinstance(p, NetworkPlayer)
    }
    slots: list[_Slot | None] = [None] * parallel
    next_game = 0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(schedule), unit="game", desc=f"{a.name} vs {b.name}", file=sys.stderr)

    def mover(slot: _Slot) -> ArenaPlayer:
        black = slot.game.position.black_to_move
        return a if black == slot.a_black else b

    def finish(g: int, slot: _Slot) -> bool:
        game = slot.game
        if game.outcome is None:
            return False
        opening = openings[slot.opening_index]
        black, white = (a, b) if slot.a_black else (b, a)
        record = GameRecord(opening, black.name, white.name, tuple(game.moves), game.outcome, slot.seed)
        result.games.append(record)
        result.a_is_black.append(slot.a_black)
        result.opening_index.append(slot.opening_index)
        slots[g] = None
        for search in searches.values():
            search.stop(g)
        if on_game is not None:
            on_game(record, result)
        if bar is not None:
            bar.update()
            bar.set_postfix_str(f"W{result.wins} D{result.draws} L{result.losses}")
        return True

    def apply(g: int, slot: _Slot, move: Move) -> None:
        slot.game.play(move)
        slot.searching = False
        if slot.game.outcome is None and slot.game.ply >= max_plies:
            slot.game.finish(0, Termination.MAX_LENGTH)
        if slot.game.outcome is None:
            for search in searches.values():
                search.play(g, move, slot.game)

    try:
        while True:
            stop = should_stop is not None and should_stop(result)
            for g in range(parallel):
                if slots[g] is None and next_game < len(schedule) and not stop:
                    slots[g] = _start(g, next_game, schedule, openings, rules, seed, a, b, searches)
                    next_game += 1
            live = [(g, s) for g, s in enumerate(slots) if s is not None]
            if stop or not live:
                break
            progressed = False
            for g, slot in live:
                if finish(g, slot):
                    progressed = True
                    continue
                player = mover(slot)
                legal = slot.game.legal_moves()
                if len(legal) == 1:
                    apply(g, slot, legal[0])
                elif isinstance(player, NetworkPlayer):
                    if not slot.searching:
                        searches[id(player)].start(g, player.simulations)
                        slot.searching = True
                    continue
                else:
                    apply(g, slot, player.choose(slot.game))
                progressed = True
                finish(g, slot)
            for player in (a, b):
                if not isinstance(player, NetworkPlayer):
                    continue
                search = searches[id(player)]
                if not search.active.any():
                    continue
                search.step(player.evaluator)
                for g in np.flatnonzero(search.complete()):
                    slot = slots[g]
                    children = search.root_children(g)
                    k = sample_by_visits(children.visits, 0.0, None)
                    move = children.move(k, slot.game.position)
                    search.stop(g)
                    apply(g, slot, move)
                    finish(g, slot)
                progressed = True
            if not progressed:
                raise RuntimeError("arena made no progress: no player could move")
    finally:
        if bar is not None:
            bar.close()
    return result


def _start(g, k, schedule, openings, rules, seed, a, b, searches) -> _Slot:
    opening_index, a_black = schedule[k]
    opening = openings[opening_index]
    game_seed = mix_seed(seed, k)
    game = start_game(*((a, b) if a_black else (b, a)), opening, rules, game_seed)
    for search in searches.values():
        search.set_root(g, game)
    return _Slot(k, opening_index, a_black, game, game_seed)

