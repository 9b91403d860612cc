"""The analysis engine for programs: `from play.api import Engine`.

    from play.api import Engine
    engine = Engine()                                  # the shipped network; or Engine("runs/default")
    answer = engine.analyse(moves=["11-15", "23-19"], time=0.5)
    answer["move"], answer["wdl"], answer["moves"][0]["pv"]

Answers are the JSON engine protocol's answers, as Python dicts (`play/ENGINE_PROTOCOL.md` lists their
fields): the protocol's front end (`play.protocol`) feeds its queries through `submit` and `step` here, so
the two cannot drift apart. Many positions are searched together in one batched search: `answers` takes
any number of queries and yields each answer as its search finishes. (`play.engine.Engine` is the engine a
person plays against in the terminal and the browser.)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from play.queries import (EngineSettings, QueryError, VersionQuery, error_answer, parse_query,
                          version_answer)


class Engine:
    """A checkpoint's network and the batched search over many positions. Not thread-safe."""

    def __init__(self, checkpoint: str | Path | None = None, settings: EngineSettings | None = None,
                 endgame_database: bool = True):
        """`checkpoint`: a checkpoint file or a run directory (its best network); None = the shipped network.
        With the endgame database (as play.engine.Engine.load) positions it holds are exact. Raises
        play.engine.EngineError when it cannot be loaded."""
        from play.analysis_pool import AnalysisPool
        from play.engine import MctsEngine
        from selfplay.tree_search.evaluators import CachedEvaluator

        self.settings = settings or EngineSettings()
        self.settings.validate()
        # The batched search is MCTS over a network (the shipped one for None), whatever the default player is.
        loaded = MctsEngine.load(checkpoint, endgame_database, opening_book=False)  # it analyses, never plays
        self.network = loaded.checkpoint.stem
        evaluator = loaded.evaluator
        if self.settings.cache_positions:
            evaluator = CachedEvaluator(evaluator, self.settings.cache_positions)
        self.pool = AnalysisPool(evaluator, self.settings, loaded.egdb, network=loaded.evaluator)

    # -- one position, for scripts -------------------------------------------------------------------
    def analyse(self, fen: str | None = None, moves: Sequence[str] = (), *, simulations: int | None = None,
                time: float | None = None, nodes: int | None = None, top: int | None = None, pv: bool = True,
                wdl: bool = True) -> dict[str, Any]:
        """The answer for the position after `moves` from `fen` (default the standard start). Limits as in
        the protocol (the first reached stops the search; none given = the default simulations).
        Raises QueryError for anything the protocol would answer with an error."""
        return self.analyse_plies(fen, moves, None, simulations=simulations, time=time, nodes=nodes, top=top,
                                  pv=pv, wdl=wdl)[0]

    def analyse_plies(self, fen: str | None, moves: Sequence[str], plies: Sequence[int] | None,
                      **fields: Any) -> list[dict[str, Any]]:
        """Answers for several plies of one game (None: the last), in the order of `plies`; `fields` are
        the protocol's (simulations, time, nodes, top, pv, wdl)."""
        query: dict[str, Any] = {"fen": fen, "moves": list(moves)}
        if plies is not None:
            query["analyze_plies"] = list(plies)
        query.update((name, value) for name, value in fields.items() if value is not None)
        by_ply = {}
        for reply in self.answers([query]):
            if "error" in reply:
                raise QueryError(reply["error"])
            by_ply[reply["ply"]] = reply
        return [by_ply[ply] for ply in (plies if plies is not None else by_ply)]

    # -- many queries ----------------------------------------------------------------------------------
    def answers(self, queries: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """Answers to protocol queries (dicts as the JSON lines carry them), each as soon as it is ready:
        a query is taken from `queries` only when a tree is free for it, so a long stream is never held
        whole. A bad query gets an error answer in the stream, as in the protocol."""
        pending = iter(queries)
        exhausted = False
        while True:
            while not exhausted and self.pool.wants_more:
                query = next(pending, None)
                if query is None:
                    exhausted = True
                else:
                    yield from self.submit(query)
            if exhausted and self.pool.idle:
                return
            yield from self.step()

    def submit(self, query: Any) -> list[dict[str, Any]]:
        """Take one protocol query: an analysis joins the search (its answers come from `step`); what can be
        answered at once (a version query, an error) is returned."""
        try:
            parsed = parse_query(query, self.settings)
        except QueryError as exc:
            return [error_answer(str(exc), exc.query_id)]
        if isinstance(parsed, VersionQuery):
            return [version_answer(parsed, self.network, self.settings)]
        self.pool.submit(parsed)
        return []

    def step(self) -> list[dict[str, Any]]:
        """One batched search step over every position in flight; the answers of those it finished."""
        return self.pool.step()

    @property
    def idle(self) -> bool:
        return self.pool.idle

    @property
    def wants_more(self) -> bool:
        return self.pool.wants_more
