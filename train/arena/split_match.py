"""A ballot match of players on the clock, its openings split over processes of one thread each.

A player on the clock plays one game at a time (its time a move is one game's, and games in flight would
share the processor it measures), so the 288-game ballot at 0.1 s a move takes about an hour in one process.
Split over P processes, one core each, it takes 1/P of that. Each process plays a contiguous share of the
openings, both colours each (game seeds count from the share's first game, which changes only the random
tie-breaks of plain players); the shares join into one MatchResult in ballot order, so its score, Elo
interval and pairs are one match's. What equal-time comparisons use: benchmarks/split_match.py, and
`checkers-zero ship` when the two networks differ in shape.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import signal
from collections.abc import Sequence

from tqdm import tqdm

from train.arena.match import MatchGame, MatchResult, mix_seed, play_match
from zero.corpus.openings import Opening
from zero.rules.game import RulesConfig

_finished = None  # in a worker: a count of finished games shared with the parent (its progress), or None


def _start_worker(finished) -> None:
    global _finished
    import torch

    # A player on the clock measures its own core: a second thread would take another game's.
    torch.set_num_threads(1)
    # Ctrl-C is the parent's to handle (it ends the pool); a worker's traceback for it would say nothing.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _finished = finished


def worker_pool(processes: int, finished=None):
    """A pool of `processes` spawned processes of one thread each, for play_share; `finished` (a shared
    integer from the spawn context, mp.get_context("spawn").Value) counts the games they finish."""
    return mp.get_context("spawn").Pool(processes, initializer=_start_worker, initargs=(finished,))


@dataclasses.dataclass(frozen=True)
class Share:
    """Players given as train.arena.player_specs specs play `openings`, each with both colours (A as Black first)."""

    spec_a: str
    spec_b: str
    openings: list[Opening]
    seed: int  # the match seed (game k's is mix_seed(seed, k)); the players take mix_seed(seed, 0) and (seed, 1)
    rules: RulesConfig = RulesConfig()


def play_share(share: Share) -> MatchResult:
    """A share's games, played in this process (a worker_pool process) one game at a time."""
    from train.arena.gating import GatingConfig
    from train.arena.player_specs import make_player

    search = GatingConfig().search
    a = make_player(share.spec_a, seed=mix_seed(share.seed, 0), search=search)
    b = make_player(share.spec_b, seed=mix_seed(share.seed, 1), search=search)

    def count(_game: MatchGame, _result: MatchResult) -> None:
        with _finished.get_lock():
            _finished.value += 1

    return play_match(a, b, share.openings, share.rules, seed=share.seed, parallel=1,
                      on_game=None if _finished is None else count)


def play_split_match(spec_a: str, spec_b: str, openings: Sequence[Opening], processes: int, seed: int = 0,
                     rules: RulesConfig = RulesConfig(), progress: bool = False, pool=None) -> MatchResult:
    """Players given as train.arena.player_specs specs (e.g. "mcts:NET:t0.1") play every opening with both colours,
    the openings split over `processes` processes (see the module doc): a pool of their own, or `pool`
    (worker_pool's, of at least `processes`), where many short matches would each pay for starting one."""
    n = len(openings)
    shares = share_bounds(n, processes)
    jobs = [Share(spec_a, spec_b, list(openings[first:last]), seed, rules) for first, last in shares]
    if pool is not None:
        return joined_shares([first for first, _ in shares], pool.map(play_share, jobs))
    counter = mp.get_context("spawn").Value("i", 0)
    with worker_pool(len(jobs), counter) as own:
        pending = own.map_async(play_share, jobs)
        with tqdm(total=2 * n, desc=f"{spec_a} vs {spec_b}", unit=" games", disable=not progress,
                  dynamic_ncols=True) as bar:
            while not pending.ready():
                pending.wait(1.0)
                bar.update(counter.value - bar.n)
        results = pending.get()
    return joined_shares([first for first, _ in shares], results)


def share_bounds(openings: int, processes: int) -> list[tuple[int, int]]:
    """The contiguous shares (first, last + 1) of `openings` ballot entries over `processes` processes."""
    if processes < 1:
        raise ValueError("processes must be at least 1")
    bounds = [round(k * openings / processes) for k in range(processes + 1)]
    return [(bounds[k], bounds[k + 1]) for k in range(processes) if bounds[k] < bounds[k + 1]]


def joined_shares(firsts: Sequence[int], results: Sequence[MatchResult]) -> MatchResult:
    """One match from the shares' results, each share's games starting at ballot entry `firsts[k]`."""
    joined = MatchResult(results[0].a, results[0].b)
    for first, share in zip(firsts, results):
        for game, a_black, opening in zip(share.games, share.a_is_black, share.opening_index):
            # Rounds and openings as the whole ballot numbers them (two games an opening).
            joined.add(dataclasses.replace(game, round=game.round + 2 * first), a_black, first + opening)
    return joined
