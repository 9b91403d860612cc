"""The one JSON shape of a search's analysis of a position: `analyze --json`, the engine protocol (and its
Python API, `play.api`) and the browser's engine thinking and hints all write it here, so their keys cannot
drift apart. `play/ENGINE_PROTOCOL.md` ("Answers") describes every field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the search (numba kernels) is imported only where a search runs
    from selfplay.tree_search.analysis import Analysis, Proven
    from zero.rules.game import Position


def wdl_json(wdl: tuple[float, float, float]) -> dict[str, float]:
    return {name: round(float(x), 4) for name, x in zip(("win", "draw", "loss"), wdl)}


def proven_json(proven: Proven | None) -> dict[str, Any] | None:
    if proven is None:
        return None
    return {"value": {1: "win", 0: "draw", -1: "loss"}[proven.value], "plies": proven.plies,
            "source": "database" if proven.by_database else "search", "text": str(proven)}


def expected_score(wdl: tuple[float, float, float]) -> float:
    """Win plus half the draw chance: the points the player expects from the position."""
    return float(wdl[0]) + float(wdl[1]) / 2


def analysis_json(analysis: Analysis, position: Position, ply: int, *, query_id: str | int | None = None,
                  top: int | None = None, pv: bool = True, wdl: bool = True) -> dict[str, Any]:
    """The analysis of `position` (`ply` moves into its game) as JSON-ready data. Values are for the side to
    move, a candidate's for the player making it (the same player). `top` candidates (None: every legal move);
    without `pv` no principal variation nor candidate lines (`analysis.lines` must hold the candidates' lines
    otherwise), without `wdl` no candidate win/draw/loss."""
    total = sum(stat.visits for stat in analysis.moves) or 1
    moves = []
    for stat in analysis.moves if top is None else analysis.moves[:top]:
        entry: dict[str, Any] = {"move": str(stat.move), "path": list(stat.move.path), "visits": int(stat.visits),
                                 "share": round(stat.visits / total, 4), "prior": round(float(stat.prior), 4)}
        if wdl:
            entry["wdl"] = None if stat.wdl is None else wdl_json(stat.wdl)
        if pv:
            entry["pv"] = [str(m) for m in analysis.lines[stat.move]]
        entry["proven"] = proven_json(stat.proven)
        moves.append(entry)
    out: dict[str, Any] = {
        "id": query_id,
        "ply": ply,
        "fen": position.fen(),
        "side": "black" if position.black_to_move else "white",
        "move": str(analysis.moves[0].move),
        "wdl": wdl_json(analysis.root_wdl),
        "score": round(expected_score(analysis.root_wdl), 4),
        "proven": proven_json(analysis.proven),
        "plies_left": None if analysis.plies_left is None else round(float(analysis.plies_left), 1),
        "simulations": int(analysis.simulations),
        "depth": analysis.depth,
        "nodes": int(analysis.nodes),
        "seconds": round(float(analysis.seconds), 3),
        "moves": moves,
    }
    if pv:
        out["pv"] = [str(m) for m in analysis.pv]
    return out
