"""Shipping a network: the shipped one (zero.net.checkpoint.DEFAULT_CHECKPOINT) changes only for a proven better one.

The rule: the candidate plays the shipped network over the whole ACF 3-move ballot (144 openings, each with
both colours: 288 games), and replaces it only when the lower bound of the 95 % Elo interval (train.arena.match,
over opening pairs) lies above 0. A run of fewer games (`--games`, or a ballot file of fewer openings) is a
quick look and never ships. Like is compared with like:
- two networks of one shape play at equal search (both `mcts` players at the same simulations, gating's
  search settings, in lockstep, as `checkers-zero match mcts:A:64 mcts:B:64` plays it);
- networks of different shapes play at equal time (`seconds` a move each, one core each, the ballot split
  over `processes` processes: train.arena.split_match), because a smaller network's worth is the search its
  speed buys, which equal simulations would hide.

The shipped network keeps its one file name (DEFAULT_CHECKPOINT); shipping rewrites it atomically with the
candidate's weights and lineage (no optimizer state: training goes on from the run's own trainer state,
`loop --from RUN --take-replay`), optionally in half precision, and then appends the next link of the
chain to the model card beside it (checkpoints/README.md): the networks, runs, settings, code versions,
games, positions and trainer steps behind it (train.shipping.lineage), and the head-to-head result against its
predecessor.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from selfplay.actors.actor import MAX_GAMES_IN_FLIGHT, load_ballot
from selfplay.tree_search.evaluators import CachedEvaluator
from selfplay.tree_search.search import MOST_SIMULATIONS
from train.arena.gating import GatingConfig
from train.arena.match import (MATCH_CACHE_POSITIONS, MatchResult, NetworkPlayer, format_elo, format_elo_interval,
                               match_schedule, play_match)
from train.arena.split_match import play_split_match
from train.learner.pretrain import predict, split_metrics
from train.learner.pretrain_dataset import open_dataset
from train.shipping.lineage import run_summary
from zero.net.checkpoint import (DEFAULT_CHECKPOINT, Checkpoint, load_checkpoint, resolve_checkpoint, save_checkpoint,
                             weights_sha256)
from zero.net.inference import Evaluator
from zero.rules.game import RulesConfig
from zero.run.config import (MOST_GAMES, MOST_PROCESSES, MOST_SEED, atomic_write_bytes, check_settings, code_version,
                             file_sha256, notify, setting)
from zero.run.data import REPOSITORY
from zero.run.rundir import RunDir

# The link of the chain a shipped network is when its file records none: the pretrained network.
FIRST_LINK = 1
# The games the rule needs: the ACF 3-move ballot's 144 openings with both colours. A ballot file of fewer
# (a few openings' file, `--set openings=...`) is a quick look however it is named: a handful of won pairs
# has a spread of 0 and an interval that says nothing.
BALLOT_GAMES = 288


@dataclass
class ShipConfig:
    """The promotion match; its defaults are the rule (see the module doc)."""

    # Root visits a move, networks of one shape.
    simulations: int = setting(GatingConfig.simulations, low=1, high=MOST_SIMULATIONS)
    # Networks of different shapes: seconds a move each, and processes (one core each) sharing the ballot.
    seconds: float = setting(0.1, above=0)
    processes: int = setting(2, low=1, high=MOST_PROCESSES)
    # 0: the whole ballot; fewer games are a quick look that never ships.
    games: int = setting(0, low=0, high=MOST_GAMES)
    openings: str = GatingConfig.openings  # relative to the data folder, or an absolute path
    # Games in flight at equal search (their leaves share a network batch).
    parallel_games: int = setting(GatingConfig.parallel_games, low=1, high=MAX_GAMES_IN_FLIGHT)
    seed: int = setting(0, low=0, high=MOST_SEED)
    # Store the shipped weights as float16 (half the file; tests/test_ship.py shows the same moves).
    half: bool = False
    # A pretraining dataset of the OCA (`checkers-zero pretrain dataset --out runs/expert-oca`): the card gives
    # the shipped network's raw policy on its test split (top-1 against the expert's move, value loss).
    # "" or a folder without one: the card says it was not measured.
    oca_dataset: str = "runs/expert-oca"

    def validate(self) -> None:
        check_settings(self)


@dataclass
class ShipOutcome:
    result: MatchResult
    full_ballot: bool
    promoted: bool  # the candidate beat the shipped network by the rule, and was shipped
    entry: str = ""  # the model card's new link (when promoted)

    def verdict(self) -> str:
        low = self.result.elo_ci95[0]
        bound = f"is {format_elo(low)}" if math.isfinite(low) else "is not finite"
        if self.promoted:
            return f"shipped: the lower bound of the Elo interval {bound}, above 0"
        if not self.full_ballot:
            return (f"nothing shipped: a quick look of {len(self.result.games)} games (the rule needs the whole "
                    f"ballot, at least {BALLOT_GAMES} games; the lower bound {bound})")
        return f"nothing shipped: the lower bound of the Elo interval {bound}, not above 0"


def model_card(shipped: Path) -> Path:
    return shipped.parent / "README.md"


def equal_time(candidate: Checkpoint, shipped: Checkpoint) -> bool:
    """Whether the two networks must meet at equal time rather than equal search (see the module doc)."""
    return candidate.net_config != shipped.net_config


def head_to_head(candidate: Checkpoint, shipped: Checkpoint, cfg: ShipConfig, progress: bool = False) -> MatchResult:
    """The candidate (player A) against the shipped network over the ballot, at equal search or, for
    networks of different shapes, at equal time. At equal search the networks play with the weights loaded
    here; at equal time the match's processes load the files when they start."""
    openings = load_ballot(cfg.openings)
    if equal_time(candidate, shipped):
        if cfg.games:
            openings = openings[:(cfg.games + 1) // 2]
        specs = [f"mcts:{network.path}:t{cfg.seconds:g}" for network in (candidate, shipped)]
        return play_split_match(*specs, openings, cfg.processes, cfg.seed, progress=progress)
    search = GatingConfig().search
    players = [NetworkPlayer(f"{role}:{network.path.stem}",
                             CachedEvaluator(Evaluator(network.build_network(), source=network.path),
                                             MATCH_CACHE_POSITIONS), cfg.simulations, search)
               for role, network in (("candidate", candidate), ("shipped", shipped))]
    return play_match(*players, openings, RulesConfig(), seed=cfg.seed, games=cfg.games or None,
                      parallel=cfg.parallel_games, progress=progress)


def ship(candidate_name: str | Path, cfg: ShipConfig, shipped: Path = DEFAULT_CHECKPOINT,
         progress: bool = False) -> ShipOutcome:
    """Play the promotion match and, when the candidate wins it by the rule, ship it (see the module doc).
    CheckpointError for a candidate that is no checkpoint or run; ValueError for one that is shipped already."""
    cfg.validate()
    candidate = resolve_checkpoint(candidate_name)
    # Loaded once: the match plays these weights and the record names these bytes, whatever happens to the
    # file meanwhile.
    network, predecessor = load_checkpoint(candidate), load_checkpoint(shipped)
    if weights_sha256(network.state_dict) == weights_sha256(predecessor.state_dict):
        raise ValueError(f"{candidate} holds the weights of the shipped network {shipped}")
    result = head_to_head(network, predecessor, cfg, progress)
    schedule = len(match_schedule(load_ballot(cfg.openings)))
    full = len(result.games) == schedule >= BALLOT_GAMES
    outcome = ShipOutcome(result, full, full and result.elo_ci95[0] > 0)
    if outcome.promoted:
        outcome.entry = install(candidate, network, shipped, result, cfg)
    return outcome


def install(candidate: Path, network: Checkpoint, shipped: Path, result: MatchResult, cfg: ShipConfig) -> str:
    """Replace the shipped network by the candidate (one atomic rename), then append its link to the model
    card; returns the card's new text for the link."""
    predecessor = load_checkpoint(shipped)
    link = predecessor.provenance.get("ship", {}).get("link", FIRST_LINK) + 1
    if not _same_file(candidate, network.file_sha256):
        notify(f"{candidate} was replaced or removed during the match: shipping the network loaded at its start "
               f"(sha256 {network.file_sha256})")
    run = network.provenance.get("run")
    summary = run_summary(Path(run)) if run and RunDir(run).made(network.provenance) else None
    budget = ({"seconds": cfg.seconds} if equal_time(network, predecessor) else {"simulations": cfg.simulations})
    match = {"games": len(result.games), "wins": result.wins, "draws": result.draws, "losses": result.losses,
             "score": result.score, "elo": result.elo, "elo_ci95": list(result.elo_ci95),
             "pairs": result.pentanomial(), **budget, "seed": cfg.seed, "openings": cfg.openings}
    record = {"link": link, "candidate": str(candidate.resolve()), "candidate_sha256": network.file_sha256,
              "candidate_code_version": network.code_version, "candidate_created": network.created,
              "predecessor_sha256": predecessor.file_sha256, "predecessor_step": predecessor.step, "match": match,
              "oca_test": raw_policy_on_test_split(network, cfg.oca_dataset), "code_version": code_version()}
    save_checkpoint(shipped, net=network.build_network(), net_config=network.net_config, step=network.step,
                    parent=str(candidate.resolve()), ratings=network.ratings, metrics=network.metrics,
                    provenance={**network.provenance, "ship": record}, extra=network.extra, half=cfg.half)
    entry = card_entry(shipped, network, record, summary, cfg)
    card = model_card(shipped)
    text = card.read_text() if card.exists() else f"# The shipped network: `{shipped.name}`\n"
    atomic_write_bytes(card, (text.rstrip("\n") + "\n\n" + entry).encode())
    return entry


def _same_file(path: Path, sha256: str | None) -> bool:
    try:
        return file_sha256(path) == sha256
    except OSError:
        return False


def raw_policy_on_test_split(network: Checkpoint, dataset: str) -> dict | None:
    """The network's raw policy and value on a pretraining dataset's test split (train.learner.pretrain's metrics),
    or None without a dataset there."""
    if not dataset or not (Path(dataset) / "zarr.json").exists():
        return None
    data = open_dataset(dataset)
    rows = data.rows("test")
    m = split_metrics(predict(network.build_network(), data, rows, torch.device("cpu"), 1024), data, rows)
    return {"dataset": dataset, "positions": m["policy"]["positions"], "top1": m["policy"]["top1"],
            "top3": m["policy"]["top3"], "value_ce": m["value"]["ce"]}


# ------------------------------------------------------------------------------------------------ the card

def card_entry(shipped: Path, network: Checkpoint, record: dict, summary: dict | None, cfg: ShipConfig) -> str:
    """The model card's section for one shipped link (Markdown)."""
    match = record["match"]
    low, high = match["elo_ci95"]
    size = shipped.stat().st_size
    run_name = Path(summary["path"]).name if summary else "no run directory"
    lines = [
        f"## Link {record['link']}: `{Path(record['candidate']).name}` of {run_name}, shipped "
        f"{load_checkpoint(shipped).created[:10]}",
        "",
        f"`{shipped.name}`: {size / 1e6:.1f} MB, {'float16' if cfg.half else 'float32'} weights (loaded as "
        f"float32), no optimizer state; sha256 `{file_sha256(shipped)}`. Written by `checkers-zero ship` at code "
        f"version {record['code_version']}.",
        "",
        f"- Network: `{card_path(record['candidate'])}` (sha256 `{record['candidate_sha256'][:16]}…`, written at "
        f"code version {record['candidate_code_version']}, {record['candidate_created']}); {network.net_config}; "
        f"trainer step {network.step:,}" + _drawn(network) + ".",
        f"- Head-to-head against link {record['link'] - 1} (sha256 `{record['predecessor_sha256'][:16]}…`, "
        f"step {record['predecessor_step']:,}): {match['games']} games of `{card_path(match['openings'])}` at "
        f"{_budget(match)} each, seed {match['seed']}: +{match['wins']} ={match['draws']} "
        f"-{match['losses']}, score {match['score']:.3f}, Elo {format_elo(match['elo'])} (95 % CI "
        f"{format_elo_interval(low, high)}); pairs by the candidate's points 0/0.5/1/1.5/2: "
        f"{'/'.join(str(c) for c in match['pairs'])}.",
        _raw_policy(record.get("oca_test")),
    ]
    if summary is None:
        lines.append(_pretraining(network.provenance))
        return "\n".join(lines) + "\n"
    lines.append(f"- Parent networks: {_parents(summary)}.")
    lines += ["", "Runs, newest first (each as recorded by the one that continued it):", ""]
    while summary is not None:
        lines += _run_section(summary)
        continued = summary["continued_from"]
        summary = continued["source_summary"] if continued else None
    return "\n".join(lines) + "\n"


_ABSOLUTE_IN_TOML = re.compile(r'"(/[^"]*)"')


def card_path(path: str | None) -> str:
    """A path as the card writes it: relative to the repository when inside it, else from the run directory it
    lies in (`RUN/checkpoints/candidate-N.pt`), else its last part. The provenance keeps the absolute path,
    which finds the run again; the card is read on other machines, where that path means nothing."""
    if path is None or not Path(path).is_absolute():
        return str(path)
    full = Path(path)
    if full.is_relative_to(REPOSITORY):
        return str(full.relative_to(REPOSITORY))
    parts = full.parts
    if "checkpoints" in parts[:-1]:
        run_at = len(parts) - 1 - parts[::-1].index("checkpoints") - 1
        return str(Path(*parts[run_at:]))
    return full.name


def _provenance_json(provenance: dict) -> str:
    return json.dumps({key: card_path(value) if isinstance(value, str) and value.startswith("/") else value
                       for key, value in provenance.items()}, default=str)


def _raw_policy(oca: dict | None) -> str:
    if oca is None:
        return "- Raw policy on the OCA test split: not measured (no dataset; ShipConfig.oca_dataset)."
    return (f"- Raw policy on the OCA test split (`{card_path(oca['dataset'])}`, {oca['positions']:,} positions "
            f"with a choice): top-1 {oca['top1']:.1%}, top-3 {oca['top3']:.1%}; value cross-entropy "
            f"{oca['value_ce']:.4f}.")


def _pretraining(provenance: dict) -> str:
    """The card's line for a network with no run described: pretrained or distilled, made by a run that is
    not here, or else its provenance."""
    if "run" in provenance:
        return (f"- Run: `{card_path(provenance['run'])}`, not on this machine (that path is absent, or another "
                f"run's), so not described here (provenance {_provenance_json(provenance)}).")
    if "dataset" not in provenance:
        return f"- Run: none recorded (provenance {_provenance_json(provenance)})."
    source = f"`{card_path(provenance['dataset'])}` (from `{card_path(provenance.get('source'))}`, sha256 " \
             f"`{str(provenance.get('source_sha256'))[:16]}…`)"
    teacher = f"`{card_path(provenance.get('teacher'))}` (sha256 `{str(provenance.get('teacher_sha256'))[:16]}…`)"
    made = (f"distilled from {teacher} (its policy, win/draw/loss and plies left) on {source} "
            f"and {provenance.get('teacher_positions', 0):,} positions of the teacher's own games"
            if provenance.get("teacher") else f"pretrained on {source}")
    return (f"- Made by pretraining, no loop run: {made}, at code version {provenance.get('code_version')}; "
            f"command `{provenance.get('command')}`.")


def _budget(match: dict) -> str:
    if "seconds" in match:
        return f"{match['seconds']:g} s a move (equal time: the networks differ in shape)"
    return f"{match['simulations']} simulations"


def _drawn(network: Checkpoint) -> str:
    extra = network.extra
    if "samples_drawn" not in extra:
        return ""
    return (f", {extra['samples_drawn']:,} self-play samples drawn over {extra.get('positions_committed', 0):,} "
            f"committed positions")


def _parents(summary: dict) -> str:
    initial = summary["initial"]
    start = (f"the run started from `{initial['name']}` (step {initial['step']:,}, sha256 "
             f"`{initial['sha256'][:16]}…`)" if initial else "the run's start is not recorded")
    promoted = [f"`{Path(p['candidate']).name}` (+{p['wins']} ={p['draws']} -{p['losses']}, Elo {format_elo(p['elo'])} "
                f"[{format_elo_interval(*p['elo_ci95'])}])" for p in summary["promotions"]]
    return start + ("; promoted in the run since: " + ", ".join(promoted) if promoted else "")


def _run_section(summary: dict) -> list[str]:
    lines = [f"### Run `{card_path(summary['path'])}`", ""]
    for record in summary["records"]:
        lines.append(f"- {record['name']}: started {record['started']}, code version {record['code_version']}")
    replay = summary["replay"]
    if replay:
        results = ", ".join(f"{name} {count:,}" for name, count in replay["results"].items())
        lines.append(f"- Replay store: {replay['games']:,} games, {replay['positions']:,} positions ({results}).")
    continued = summary["continued_from"]
    if continued:
        copied, trainer = continued["copied"], continued["trainer_state"]
        best = continued["source_best"]
        then = f"`{best['name']}`, step {best['step']:,}" if best else "no best network"
        lines.append(f"- Continued `{card_path(continued['source'])}` (its best then: {then}): took "
                     f"{copied['games']:,} games ({copied['positions']:,} positions) of its newest "
                     f"{copied['window']:,}, and its trainer state at step {trainer['step']:,}.")
    if summary["config"]:
        lines += ["", "<details><summary>loop-config.toml</summary>", "", "```toml", _ABSOLUTE_IN_TOML.sub(
                      lambda m: f'"{card_path(m.group(1))}"', summary["config"].rstrip("\n")),
                  "```", "", "</details>"]
    return lines + [""]
