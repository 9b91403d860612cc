"""Elo ratings with 95 % intervals for every checkpoint, anchored to fixed yardstick players.

All games a run records (gating matches, rating matches against the yardsticks, yardstick calibration games)
go into one table of pairwise results. Ratings are the maximum-likelihood Bradley-Terry/Elo fit of that
table, draws counted as half a win and half a loss, with the random player pinned at 0 Elo so that numbers
mean the same in every run. One virtual draw is added to every pair that has met: without it a perfect
score (random against depth-6 alpha-beta) has no finite maximum; the pull it adds is a few Elo once a pair
has played dozens of games. Intervals come from the inverse Fisher information at the optimum.

An interval against the anchor carries the anchor's own uncertainty, which is large: random scores nothing
against the other yardsticks, so its distance to them is barely measured. Each rating therefore also has an
interval for its difference to REFERENCE, the yardstick closest in strength to the checkpoints; that is the
interval that says whether one checkpoint is stronger than another, and the one the plot draws.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from zero.endgames.endgame_judge import EndgameMistakes
from zero.run.config import atomic_write_bytes

ANCHOR = "random"
REFERENCE = "alphabeta:4"
# The yardsticks every checkpoint is rated against (player specs of zero/yardsticks/players.py and
# zero/yardsticks/classical.py), each calibrated against its neighbour once per run. Depths 8-12 because the loop's
# networks pass depth 6; depth 12
# still moves in well under 0.1 s on average (benchmarks/RESULTS.md, yardstick players). The classical engine
# tops the ladder at a fixed depth, as every yardstick here is: its moves are a function of the position and
# the game's seed (an empty table each move, the 4-piece database, which every machine builds alike), so its
# calibration means the same in every run. classical:10 took 63 ms a move to alphabeta:12's 210 ms and scored
# +9 =7 -0 against it over the first 8 openings of the ballot (2026-11-25): a step like ab6's over ab4.
YARDSTICKS = ("random", "alphabeta:2", "alphabeta:4", "alphabeta:6", "alphabeta:8", "alphabeta:10", "alphabeta:12",
              "classical:10")
ELO_SCALE = 400.0 / math.log(10.0)


@dataclass
class PlayerInfo:
    name: str
    kind: str  # "yardstick" or "checkpoint"
    step: int | None = None  # training step, for checkpoints
    path: str | None = None


@dataclass
class Rating:
    name: str
    elo: float
    ci95: float  # half-width of the 95 % interval (0 for the anchor, inf when unconnected)
    games: int
    ci95_ref: float = float("inf")  # half-width of the 95 % interval of (elo - REFERENCE's elo)


@dataclass
class RatingsTable:
    """Pairwise results, stored as RUN/ratings.json and rewritten atomically after every match."""

    players: dict[str, PlayerInfo] = field(default_factory=dict)
    # results["a|b"] = [wins of a, draws, losses of a], with a < b in sort order
    results: dict[str, list[int]] = field(default_factory=dict)
    # Keys of the matches whose results are in `results`: a match replayed after an interruption is
    # recognised by its key and not counted again.
    recorded: list[str] = field(default_factory=list)
    # Per player: moves judged against the endgame database in its recorded games, and its mistakes
    # (zero.endgames.endgame_judge), added with the match's results and so counted once too.
    endgame: dict[str, EndgameMistakes] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> "RatingsTable":
        if not path.exists():
            return cls()
        try:
            data = json.loads(path.read_text())
            players = {k: PlayerInfo(**v) for k, v in data["players"].items()}
            results = {k: [int(x) for x in v] for k, v in data["results"].items()}
            recorded = [str(k) for k in data.get("recorded", [])]
            endgame = {k: EndgameMistakes.from_json(v) for k, v in data.get("endgame", {}).items()}
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"ratings file {path} is damaged: {exc}") from exc
        return cls(players, results, recorded, endgame)

    def save(self, path: Path) -> None:
        data = {"players": {k: vars(v) for k, v in self.players.items()}, "results": self.results,
                "recorded": self.recorded, "endgame": {k: v.to_json() for k, v in self.endgame.items()}}
        atomic_write_bytes(path, json.dumps(data, indent=1, sort_keys=True).encode())

    def add_player(self, info: PlayerInfo) -> None:
        self.players.setdefault(info.name, info)

    def add_results(self, a: str, b: str, wins: int, draws: int, losses: int) -> None:
        """Record wins/draws/losses of a against b."""
        for name in (a, b):
            if name not in self.players:
                raise KeyError(f"unknown player {name!r}: add it first")
        if a == b:
            raise ValueError("a player cannot be rated against itself")
        if a > b:
            a, b, wins, losses = b, a, losses, wins
        row = self.results.setdefault(f"{a}|{b}", [0, 0, 0])
        row[0] += wins
        row[1] += draws
        row[2] += losses

    def record_match(self, key: str, a: str, b: str, wins: int, draws: int, losses: int,
                     endgame: dict[str, EndgameMistakes] | None = None) -> bool:
        """Add a match's results (and its players' endgame mistakes) once: False, and nothing added, when a
        match with this key is recorded."""
        if key in self.recorded:
            return False
        self.add_results(a, b, wins, draws, losses)
        for name, mistakes in (endgame or {}).items():
            total = self.endgame.setdefault(name, EndgameMistakes())
            total += mistakes  # in place: the table's entry
        self.recorded.append(key)
        return True

    def games_of(self, name: str) -> int:
        return sum(sum(v) for k, v in self.results.items() if name in k.split("|"))

    def fit(self) -> dict[str, Rating]:
        """Maximum-likelihood Elo for every player connected to the anchor."""
        names = sorted(self.players)
        if ANCHOR not in names:
            return {}
        index = {n: i for i, n in enumerate(names)}
        pairs = []
        for key, (w, d, l) in self.results.items():
            a, b = key.split("|")
            games = w + d + l + 1  # one virtual draw
            score = w + 0.5 * d + 0.5
            pairs.append((index[a], index[b], score, games))
        connected = _connected_to(index[ANCHOR], len(names), pairs)
        free = [i for i in range(len(names)) if i in connected and i != index[ANCHOR]]
        r = np.zeros(len(names))  # natural-log scale strengths
        hessian = np.zeros((len(free), len(free)))
        for _ in range(100):
            grad = np.zeros(len(names))
            hess = np.zeros((len(names), len(names)))
            for a, b, score, games in pairs:
                if a not in connected:
                    continue
                p = 1.0 / (1.0 + math.exp(-(r[a] - r[b])))
                g = score - games * p
                grad[a] += g
                grad[b] -= g
                h = games * p * (1 - p)
                hess[a, a] -= h
                hess[b, b] -= h
                hess[a, b] += h
                hess[b, a] += h
            if not free:
                break
            hessian = hess[np.ix_(free, free)]
            step = np.linalg.solve(hessian, -grad[free])
            r[free] += step
            if np.max(np.abs(step)) < 1e-9:
                break
        # Covariance of the strengths of every connected player, the anchor's row and column being zero.
        cov = np.zeros((len(names), len(names)))
        if free:
            cov[np.ix_(free, free)] = np.linalg.inv(-hessian)
        ref = index.get(REFERENCE)
        out = {}
        for name, i in index.items():
            if i not in connected:
                out[name] = Rating(name, float("nan"), float("inf"), self.games_of(name))
                continue
            ci = 1.96 * math.sqrt(max(cov[i, i], 0.0)) * ELO_SCALE
            ci_ref = float("inf")
            if ref is not None and ref in connected:
                ci_ref = 1.96 * math.sqrt(max(cov[i, i] + cov[ref, ref] - 2 * cov[i, ref], 0.0)) * ELO_SCALE
            out[name] = Rating(name, float(r[i] * ELO_SCALE), ci, self.games_of(name), ci_ref)
        return out


def _connected_to(start: int, n: int, pairs: list[tuple[int, int, float, int]]) -> set[int]:
    neighbours: dict[int, set[int]] = {i: set() for i in range(n)}
    for a, b, _, _ in pairs:
        neighbours[a].add(b)
        neighbours[b].add(a)
    seen = {start}
    frontier = [start]
    while frontier:
        node = frontier.pop()
        for nxt in neighbours[node] - seen:
            seen.add(nxt)
            frontier.append(nxt)
    return seen


def format_table(table: RatingsTable) -> str:
    ratings = table.fit()
    lines = [f"{'player':<40} {'kind':<10} {'step':>8} {'Elo':>8} {'±95%':>7} {'±95% vs ' + REFERENCE:>20} "
             f"{'games':>6}  solved-endgame mistakes"]
    for name, rating in sorted(ratings.items(), key=lambda kv: (-(kv[1].elo if not math.isnan(kv[1].elo) else -1e9))):
        info = table.players[name]
        step = "" if info.step is None else str(info.step)
        elo = "n/a" if math.isnan(rating.elo) else f"{rating.elo:8.0f}"
        ci, ci_ref = ("inf" if math.isinf(c) else f"{c:.0f}" for c in (rating.ci95, rating.ci95_ref))
        endgame = table.endgame.get(name, EndgameMistakes())
        lines.append(f"{name:<40} {info.kind:<10} {step:>8} {elo:>8} {ci:>7} {ci_ref:>20} {rating.games:>6}  "
                     f"{endgame}")
    return "\n".join(lines)


def checkpoint_points(table: RatingsTable, ratings: dict) -> list[tuple[int, float, float]]:
    """(step, Elo, 95 % interval) of every rated checkpoint, by step."""
    return sorted((table.players[n].step or 0, r.elo, r.ci95_ref) for n, r in ratings.items()
                  if table.players[n].kind == "checkpoint" and not math.isnan(r.elo))


def plot(table: RatingsTable, out_png: Path) -> Path:
    """Rating of each checkpoint against its training step, yardsticks as horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ratings = table.fit()
    fig, ax = plt.subplots(figsize=(8, 5))
    points = checkpoint_points(table, ratings)
    if points:
        steps, elos, cis = zip(*points)
        ax.errorbar(steps, elos, yerr=[min(c, 2000) for c in cis], marker="o", capsize=3, label="checkpoints")
    for name, r in ratings.items():
        if table.players[name].kind == "yardstick" and not math.isnan(r.elo):
            ax.axhline(r.elo, linestyle="--", linewidth=0.8, color="grey")
            # x in axes coordinates: the label stays at the left edge whatever steps the run starts from
            ax.text(0.01, r.elo, name, va="bottom", fontsize=8, color="grey", transform=ax.get_yaxis_transform())
    ax.set_xlabel("training step")
    ax.set_ylabel(f"Elo (anchor: {ANCHOR} = 0)")
    ax.set_title(f"Checkpoint ratings, 95 % intervals of the difference to {REFERENCE}")
    ax.grid(alpha=0.3)
    if points:
        ax.legend(loc="lower right")
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out_png
