"""A small plain-Python PUCT search with the same semantics as the numba kernels in `selfplay.tree_search.mcts`.

It exists to be read and to check the fast search: with a deterministic evaluator and no noise the two
must produce the same visit counts. It shares only the network input encoding with the fast search; rules
come from `zero.rules.game` (legal moves, repetitions, no-progress), priors and PUCT are written out again here.

Semantics (see selfplay.tree_search.mcts for the reasoning):
  * one step selects up to `leaves_per_tree` leaves, evaluates them in one batch, then expands and backs
    them up in selection order; a descent that reaches a pending leaf ends the step's selection, and no
    descent starts once the root is proven; with a table of remembered answers (`table`, the twin of a
    CachedEvaluator's), a leaf below the root whose position it holds is expanded and backed up with that
    answer at once and the selection goes on, and the batch goes through the table (its answers
    remembered);
  * a new node is decided by the rules first (no move = loss, repetition or no-progress = draw), then,
    below the root, with an endgame database and `database_leaves`, by the database (its value, and its
    distance as the plies to the end); a
    terminal node is proven and backed up at once with its exact value, and so is any proven node a
    descent reaches; a node with one legal move is expanded without the network and the descent goes on,
    and with `resolve_captures` so is a node where a capture is pending (equal priors);
  * a proof climbs: a node is won when a child is lost for its side to move (fastest first), lost or drawn
    when every child is proven (the best; a loss counts the longest resistance);
  * priors are the softmax of the legal logits divided by `policy_temperature`, equal where the logits
    give no distribution (NaN or infinite), and a value that is not finite counts as 0;
  * score = Q + C * prior * sqrt(N_parent) / (1 + N) with C = c_puct + c_puct_growth *
    ln((N_parent + c_puct_base) / c_puct_base), in-flight visits counted in N and as losses of
    size `virtual_loss` in Q (a proven draw's Q is 0, a child proven lost for the chooser is never
    chosen); unvisited children get Q_parent - fpu_reduction * sqrt(visited prior mass), Q_parent being 0
    before the parent's first visit; ties go to the first child in generation order; with a `draw_value`,
    every Q (the parent's and a proven draw's included) adds draw_value times the node's draw share (draw
    sum over visits, in-flight ones counted; 1 for a proven draw) where the root's side chooses, and
    subtracts it where its opponent does (nothing there with `draw_value_zero_sum` off);
  * every backup also adds the plies left (the evaluator's `predict` where the search weighs them and the
    evaluator has a moves-left head, else 0; a proven node's exact plies) plus one per ply up, and M(node)
    = that sum / its visits; with `moves_left_weight` > 0 (and such an evaluator), where the parent's Q
    for the chooser (as the first-play urgency's) is past `moves_left_threshold` in size, a child with a
    visit of its own, unproven, adds to its score -sign(Q) * weight * clamp(slope * (M(child) -
    M(parent)), -1, 1) * (|Q| - threshold) / (1 - threshold), Q its own (the score's), nothing where |Q| is
    not past the threshold;
  * with sequential halving at the root (selfplay.tree_search.gumbel; begun when the root is expanded, its phase
    advanced before each step's selection), a descent from the root takes the child below its visit limit
    with the fewest visits (in-flight ones counted), ties to the higher Gumbel score, and when every child
    has reached its limit the step selects no more.
"""

from __future__ import annotations

import math

import numpy as np

from selfplay.tree_search.answer_table import ReferenceAnswerTable
from selfplay.tree_search.evaluators import gives_plies_left
from selfplay.tree_search.gumbel import GumbelRoot, SequentialHalving
from selfplay.tree_search.search import RootChildren, SearchConfig
from zero.endgames.egdb import UNKNOWN, Egdb
from zero.net.encoding import encode, move_action
from zero.rules.game import Game, Move, Position, RulesConfig


class Node:
    def __init__(self, position: Position, no_progress: int, parent: "Node | None", move: Move | None,
                 prior: float) -> None:
        self.position = position
        self.no_progress = no_progress
        self.parent = parent
        self.move = move
        self.prior = prior
        self.children: list[Node] = []
        self.expanded = False
        self.pending = False
        # For the side to move here once proven (+1 win, 0 draw, -1 loss), with the plies to the end.
        self.proven_value: float | None = None
        self.proven_plies = -1
        self.visits = 0
        self.virtual = 0
        self.value_sum = 0.0  # from the view of the player who moved here
        self.draw_sum = 0.0
        self.plies_sum = 0.0  # plies left below here, summed over the visits (the same for both sides)

    def q_for_chooser(self, virtual_loss: float, draw_worth: float) -> float:
        return (self.value_sum - self.virtual * virtual_loss + draw_worth * self.draw_sum) / (self.visits + self.virtual)

    def depth(self) -> int:
        return 0 if self.parent is None else 1 + self.parent.depth()


class ReferenceMcts:
    def __init__(self, game: Game, evaluator, config: SearchConfig | None = None, egdb: Egdb | None = None,
                 table: ReferenceAnswerTable | None = None) -> None:
        self.config = config or SearchConfig()
        self.egdb = egdb if self.config.database_leaves else None
        self.rules: RulesConfig = game.rules
        self.evaluator = evaluator
        self.table = table
        # The moves-left utility needs an evaluator with the head; without one it is off, as in the fast search.
        self.moves_left_weight = self.config.moves_left_weight if gives_plies_left(evaluator) else 0.0
        self.root = Node(game.position, game.no_progress[-1], None, None, 1.0)
        window = game.no_progress[-1]
        self.history = game.positions[len(game.positions) - 1 - window: -1]
        self.halving_spec: GumbelRoot | None = None
        self.halving: SequentialHalving | None = None

    def run(self, simulations: int, halving: GumbelRoot | None = None) -> Node:
        """Search until the root has `simulations` visits; with `halving`, its root by sequential halving."""
        self.halving_spec, self.halving = halving, None
        while self.root.visits + self.root.virtual < simulations and self.root.proven_value is None:
            if self.halving_spec is not None and self.halving is None and self.root.expanded:
                self.halving = self.halving_spec.begin(self.network_prior(), max(simulations - self.root.visits, 1))
            if self.halving is not None:
                self.halving.advance(self.root_children(), self.network_prior())
            self.step(simulations)
        return self.root

    def network_prior(self) -> np.ndarray:
        return np.array([child.prior for child in self.root.children])

    def root_children(self) -> RootChildren:
        """The root's children in the form the fast search reports them (selfplay.tree_search.search.RootChildren)."""
        kids = self.root.children
        proven = [np.nan if c.proven_value is None else -c.proven_value for c in kids]
        zeros = np.zeros(len(kids), np.int64)
        return RootChildren(zeros, zeros, zeros, np.array([c.visits for c in kids], np.int64), self.network_prior(),
                            np.array([c.value_sum for c in kids]), np.array([c.draw_sum for c in kids]),
                            np.array(proven), np.array([c.proven_plies + 1 if c.proven_value is not None else -1
                                                        for c in kids], np.int64))

    def step(self, simulations: int) -> None:
        leaves: list[tuple[Node, int]] = []
        while (len(leaves) < self.config.leaves_per_tree and self.root.visits + self.root.virtual < simulations
               and self.root.proven_value is None):
            node = self._descend()
            if node is None:
                break  # every root child has had this phase's visits
            if node.proven_value is not None:
                value = node.proven_value
                self._backup(node, value, 1.0 if value == 0.0 else 0.0, float(node.proven_plies), in_flight=False)
                continue
            if node.pending:
                break
            planes = encode(node.position, node.no_progress, self._repetitions(node))
            answer = (self.table.lookup(self.table.key(planes)) if self.table is not None and node is not self.root
                      else None)
            if answer is not None:
                self._expand_with(node, *answer, in_flight=False)
                continue
            node.pending = True
            walk: Node | None = node
            while walk is not None:
                walk.virtual += 1
                walk = walk.parent
            leaves.append((node, planes))
        if not leaves:
            return
        planes = np.stack([p for _, p in leaves])
        if self.moves_left_weight > 0:
            logits, wdl, plies = (self.evaluator.predict(planes) if self.table is None
                                  else self.table.predict(self.evaluator, planes))
        else:
            logits, wdl = (self.evaluator.evaluate(planes) if self.table is None
                           else self.table.evaluate(self.evaluator, planes))
            plies = np.zeros(len(planes), dtype=np.float32)
        for i, (node, _) in enumerate(leaves):
            self._expand_with(node, logits[i], wdl[i], plies[i], in_flight=True)

    def _expand_with(self, node: Node, logits: np.ndarray, wdl: np.ndarray, plies: float, in_flight: bool) -> None:
        """Expand a leaf with its answer and back up its value and plies left."""
        self._expand(node, logits)
        value, draw = float(wdl[0]) - float(wdl[2]), float(wdl[1])
        if not (math.isfinite(value) and math.isfinite(draw)):
            value, draw = 0.0, 0.0  # a diverged network's answer counts as an even one
        plies = float(plies)
        if not (math.isfinite(plies) and plies > 0.0):
            plies = 0.0
        self._backup(node, value, draw, plies, in_flight=in_flight)

    def _halving_child(self) -> Node | None:
        best, best_key = None, None
        for k, child in enumerate(self.root.children):
            n = child.visits + child.virtual
            if n >= self.halving.limit[k]:
                continue
            key = (-n, float(np.float32(self.halving.score[k])))
            if best_key is None or key > best_key:
                best, best_key = child, key
        return best

    def _descend(self) -> Node | None:
        """Down the tree by PUCT to a proven, pending or new node, deciding new nodes by the rules and
        passing through the forced ones."""
        node = self.root
        while node.proven_value is None:
            if node.expanded and node is self.root and self.halving is not None:
                node = self._halving_child()
                if node is None:
                    return None
            elif node.expanded:
                node = self._best_child(node)
            elif node.pending:
                break
            else:
                moves = node.position.legal_moves()
                if self._decide_terminal(node, moves):
                    self._propagate_proof(node)
                elif len(moves) == 1 or (self.config.resolve_captures and moves[0].captured):
                    self._add_children(node, moves, [1.0 / len(moves)] * len(moves))
                    continue
                break
        return node

    def _best_child(self, node: Node) -> Node:
        if len(node.children) == 1:
            return node.children[0]
        c = self.config
        reduction = c.fpu_reduction_root if node is self.root else c.fpu_reduction
        n_parent = node.visits + node.virtual
        sqrt_n = math.sqrt(n_parent)
        c_puct = c.c_puct + c.c_puct_growth * math.log((n_parent + c.c_puct_base) / c.c_puct_base)
        visited_mass = 0.0
        for child in node.children:
            if child.visits + child.virtual > 0:
                visited_mass += child.prior
        # The root's side chooses at even depths, and there a draw is worth draw_value to it.
        draw_worth = c.draw_value if node.depth() % 2 == 0 else c.opponent_draw_value
        parent_q = (-node.value_sum + draw_worth * node.draw_sum) / node.visits if node.visits else 0.0
        fpu = parent_q - reduction * math.sqrt(visited_mass)
        # The moves-left utility where the parent's result is clear for the chooser.
        moves_left = self.moves_left_weight > 0 and node.visits > 0 and abs(parent_q) > c.moves_left_threshold
        parent_m = node.plies_sum / node.visits if moves_left else 0.0
        best, best_child = -math.inf, node.children[0]
        for child in node.children:
            if child.proven_value == 1.0:  # won for its side to move: lost for the chooser
                continue
            n = child.visits + child.virtual
            if child.proven_value == 0.0:
                q = draw_worth
            else:
                q = child.q_for_chooser(c.virtual_loss, draw_worth) if n > 0 else fpu
            score = q + c_puct * child.prior * sqrt_n / (1 + n)
            if moves_left and child.proven_value is None and child.visits > 0:
                score += self._moves_left_utility(q, child.plies_sum / child.visits, parent_m)
            if score > best:
                best, best_child = score, child
        return best_child

    def _moves_left_utility(self, q: float, child_m: float, parent_m: float) -> float:
        """The winner's bonus for fewer plies left, the loser's for more, growing from 0 at the threshold."""
        c = self.config
        strength = (abs(q) - c.moves_left_threshold) / (1.0 - c.moves_left_threshold)
        if strength <= 0.0:
            return 0.0
        effect = min(max(c.moves_left_slope * (child_m - parent_m), -1.0), 1.0)
        sign = -1.0 if q > 0.0 else 1.0
        return sign * self.moves_left_weight * effect * strength

    def _propagate_proof(self, node: Node) -> None:
        parent = node.parent
        while parent is not None and parent.proven_value is None:
            proven = [(child.proven_value, child.proven_plies + 1) for child in parent.children
                      if child.proven_value is not None]
            wins = [plies for value, plies in proven if value == -1.0]
            if wins:
                parent.proven_value, parent.proven_plies = 1.0, min(wins)
            elif len(proven) < len(parent.children):
                return
            elif any(value == 0.0 for value, _ in proven):
                parent.proven_value = 0.0
                parent.proven_plies = min(plies for value, plies in proven if value == 0.0)
            else:
                parent.proven_value, parent.proven_plies = -1.0, max(plies for _, plies in proven)
            parent = parent.parent

    def _line(self, node: Node) -> list[Position]:
        """Positions before `node` on its line, most recent first: the tree path, then the game history."""
        line = []
        walk = node.parent
        while walk is not None:
            line.append(walk.position)
            walk = walk.parent
        line.extend(reversed(self.history))
        return line

    def _repetitions(self, node: Node) -> int:
        line = self._line(node)[: node.no_progress]
        # line[k] is k + 1 plies back; the same side is to move every second ply.
        return 1 + sum(1 for k in range(1, len(line), 2) if line[k] == node.position)

    def _decide_terminal(self, node: Node, moves: list[Move]) -> bool:
        if not moves:
            node.proven_value = -1.0
        elif (self._repetitions(node) >= self.rules.repetitions_for_draw
              or node.no_progress >= self.rules.no_progress_plies):
            node.proven_value = 0.0
        elif (self.egdb is not None and node is not self.root
              and node.position.piece_count() <= self.egdb.max_pieces):
            probe = self.egdb.probe(node.position)
            if probe.value == UNKNOWN:
                return False
            node.proven_value, node.proven_plies = float(probe.value), max(probe.distance, 0)
            return True
        else:
            return False
        node.proven_plies = 0
        return True

    def _expand(self, node: Node, logits: np.ndarray) -> None:
        pos = node.position
        moves = pos.legal_moves()
        actions = [move_action(m, pos.black_to_move) for m in moves]
        # Softmax over distinct actions; an action shared by several moves is split equally among them.
        top = max(float(logits[a]) for a in actions)
        temperature = self.config.policy_temperature
        weights = [math.exp((float(logits[a]) - top) / temperature) / actions.count(a) for a in actions]
        total = 0.0
        for w in weights:
            total += w
        if not (math.isfinite(total) and total > 0.0):  # logits that give no distribution: equal priors
            weights, total = [1.0] * len(moves), float(len(moves))
        self._add_children(node, moves, [w / total for w in weights])
        node.pending = False

    def _add_children(self, node: Node, moves: list[Move], priors: list[float]) -> None:
        pos = node.position
        for move, prior in zip(moves, priors):
            no_progress = 0 if pos.is_irreversible(move) else node.no_progress + 1
            node.children.append(Node(pos.play(move), no_progress, node, move, prior))
        node.expanded = True

    def _backup(self, node: Node, value: float, draw: float, plies: float, in_flight: bool) -> None:
        v = -value
        m = plies
        walk: Node | None = node
        while walk is not None:
            walk.visits += 1
            walk.value_sum += v
            walk.draw_sum += draw
            walk.plies_sum += m
            if in_flight:
                walk.virtual -= 1
            v = -v
            m += 1.0
            walk = walk.parent
