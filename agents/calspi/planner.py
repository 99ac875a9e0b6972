"""Gated continuous-action MCTS over the calibrated ensemble (Cal-SPI's search) and the root switch.

Tree. A node holds a model state; an edge holds an action, the elite-mean reward r_hat, its
certified bound b_r = q_hat * (sigma_r + eps) (in reward units), and whether the transition is
*trusted*: its certified state-error bound q_hat * (sigma_s + eps) is within the certificate's
tolerance (the gate).

Progressive widening. A node visited N times may have at most ceil(k * N^alpha) children
(Couetoux et al. 2011). Its first child is the baseline's action pi_b(s); later ones are
perturbations pi_b(s) + sigma_pw * (high - low)/2 * N(0, I), clipped to the action box.

Gate (documented choice): an untrusted edge is *not expanded and never selected*; no value is backed
up through it, so the search's values rest only on certified transitions and an untrusted action can
never be the switching target. (The baseline's own edge at the root is kept as the fallback.)

Selection (UCT on trusted edges):   a* = argmax Q(s,a)/n(s,a) + c * sqrt(ln N(s) / n(s,a)).

Leaf value: a model rollout of the baseline for ``rollout_horizon`` steps. For every path the search
backs up two returns:
    G    = sum_t gamma^t r_hat_t                                               (model return)
    G_lb = sum_t gamma^t (r_hat_t - b_r,t)  on trusted steps, r_floor elsewhere (certified lower bound)
and stops at predicted terminal states.

Batching. Simulations run in waves of ``wave_size`` with a virtual loss; each wave makes one batched
ensemble call for all its expansions and one per rollout step for all its leaves.

Root switch (baseline-relative criterion):
    switch  iff  the best trusted root action a+ != pi_b(s)  and  LB(a+) > Q_hat(pi_b(s)) + margin,
where LB(a+) is its mean certified lower bound and Q_hat(pi_b(s)) the model value of the baseline's
action; otherwise act with pi_b(s). Variants for the ablations: ``gate=False`` trusts every edge;
``switching="greedy"`` takes argmax Q_hat; ``penalty`` > 0 replaces r_hat by r_hat - penalty * ||sigma_s||
(MOPO-style uncertainty penalty).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gauntlet.agents.calspi.calibration import Certificate
from gauntlet.agents.calspi.ensemble import EnsembleDynamics

VIRTUAL_LOSS = 1


@dataclass
class SearchConfig:
    """The search budget and the variant (Cal-SPI by default)."""

    simulations: int = 32
    wave_size: int = 8
    max_depth: int = 3
    rollout_horizon: int = 8
    discount: float = 0.99
    exploration: float = 1.0  # c in UCT, in units of the reward scale
    widening_k: float = 1.0  # progressive widening: children <= ceil(k * N^alpha)
    widening_alpha: float = 0.5
    perturbation: float = 0.3  # sigma_pw, fraction of the half action range
    margin: float = 0.0  # switch only if LB beats the baseline value by more than this
    gate: bool = True
    switching: str = "certified"  # "certified" (Cal-SPI) or "greedy" (ablations)
    penalty: float = 0.0  # MOPO-style lambda

    def __post_init__(self) -> None:
        if self.switching not in ("certified", "greedy"):
            raise ValueError(f"switching must be 'certified' or 'greedy', got {self.switching!r}")
        if self.simulations < 1 or self.wave_size < 1 or self.max_depth < 1 or self.rollout_horizon < 0:
            raise ValueError("simulations, wave_size and max_depth must be >= 1, rollout_horizon >= 0")
        if not 0.0 < self.discount <= 1.0:
            raise ValueError(f"discount must be in (0, 1], got {self.discount}")


@dataclass
class Edge:
    action: np.ndarray
    reward: float
    reward_bound: float
    trusted: bool
    child: Node
    visits: int = 0
    value_sum: float = 0.0
    lower_bound_sum: float = 0.0

    @property
    def value(self) -> float:
        return self.value_sum / self.visits if self.visits else -math.inf

    @property
    def lower_bound(self) -> float:
        return self.lower_bound_sum / self.visits if self.visits else -math.inf


@dataclass
class Node:
    state: np.ndarray
    depth: int
    terminal: bool
    edges: list[Edge] = field(default_factory=list)
    visits: int = 0
    pending: int = 0  # children proposed in the current wave, not yet evaluated by the model

    def may_widen(self, config: SearchConfig) -> bool:
        # Progressive widening: at most ceil(k * N^alpha) children.
        allowed = max(1, math.ceil(config.widening_k * max(self.visits, 1) ** config.widening_alpha))
        return len(self.edges) + self.pending < allowed


@dataclass
class Decision:
    """What the root switch decided, with everything needed to audit it."""

    action: np.ndarray
    switched: bool
    baseline_action: np.ndarray
    baseline_value: float
    best_lower_bound: float
    best_value: float
    trusted_root_actions: int
    untrusted_root_actions: int
    simulations: int

    def as_event_data(self, certificate: Certificate) -> dict[str, Any]:
        return {"switched": self.switched, "certificate": certificate.as_dict(),
                "baseline_value": self.baseline_value, "best_lower_bound": self.best_lower_bound,
                "best_value": self.best_value, "trusted_root_actions": self.trusted_root_actions,
                "untrusted_root_actions": self.untrusted_root_actions, "simulations": self.simulations,
                "action": self.action.tolist(), "baseline_action": self.baseline_action.tolist()}


class GatedSearch:
    """Cal-SPI's gated tree search from one root state (see the module docstring)."""

    def __init__(self, model: EnsembleDynamics, certificate: Certificate, baseline: Callable[[np.ndarray], np.ndarray],
                 is_terminal: Callable[[np.ndarray], np.ndarray], action_low: np.ndarray, action_high: np.ndarray,
                 *, reward_floor: float, reward_scale: float, config: SearchConfig | None = None):
        self.model, self.certificate, self.baseline, self.is_terminal = model, certificate, baseline, is_terminal
        self.action_low, self.action_high = np.asarray(action_low, float), np.asarray(action_high, float)
        self.reward_floor, self.reward_scale = float(reward_floor), float(reward_scale)
        self.config = config or SearchConfig()
        self.model_calls = 0

    # One batched model step: the only place the ensemble is called --------------------------------
    def _model_step(self, states: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, ...]:
        self.model_calls += 1
        prediction = self.model.predict(states, actions)
        rewards = prediction.rewards
        if self.config.penalty > 0:  # MOPO: r_tilde = r_hat - lambda * u(s, a)
            rewards = rewards - self.config.penalty * self.reward_scale * np.linalg.norm(
                prediction.state_disagreement, axis=-1)
        # Certified reward bound b_r = q_hat (sigma_r + eps), back in reward units.
        reward_bounds = self.certificate.error_bound(prediction.reward_disagreement) * self.model.target_norm.std[-1]
        trusted = self.certificate.trusted(prediction.state_disagreement) if self.config.gate \
            else np.ones(len(states), dtype=bool)
        terminal = self.is_terminal(prediction.next_states)
        return prediction.next_states, rewards, reward_bounds, trusted, terminal

    def _rollout_values(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Baseline rollouts in the model from a batch of leaf states: (G, G_lb) per leaf."""
        count = len(states)
        values, lower_bounds = np.zeros(count), np.zeros(count)
        alive, discount = np.ones(count, dtype=bool), 1.0
        for _ in range(self.config.rollout_horizon):
            if not alive.any():
                break
            index = np.flatnonzero(alive)
            next_states, rewards, bounds, trusted, terminal = self._model_step(states[index],
                                                                                self.baseline(states[index]))
            values[index] += discount * rewards
            lower_bounds[index] += discount * np.where(trusted, rewards - bounds, self.reward_floor)
            states = states.copy()
            states[index] = next_states
            alive[index[terminal]] = False
            discount *= self.config.discount
        return values, lower_bounds

    def _propose(self, node: Node, rng: np.random.Generator) -> np.ndarray:
        baseline_action = self.baseline(node.state[None])[0]
        node.pending += 1
        if not node.edges and node.pending == 1:
            return baseline_action
        half_range = (self.action_high - self.action_low) / 2.0
        noise = self.config.perturbation * half_range * rng.standard_normal(baseline_action.shape)
        return np.clip(baseline_action + noise, self.action_low, self.action_high)

    def _select(self, node: Node) -> Edge | None:
        candidates = [edge for edge in node.edges if edge.trusted]
        if not candidates:
            return None
        log_visits = math.log(max(node.visits, 1))
        scale = self.config.exploration * self.reward_scale

        def uct(edge: Edge) -> float:
            if edge.visits == 0:
                return math.inf
            return edge.value + scale * math.sqrt(log_visits / edge.visits)

        return max(candidates, key=uct)

    def search(self, root_state: np.ndarray, rng: np.random.Generator) -> Decision:
        config = self.config
        root = Node(np.asarray(root_state, dtype=np.float64), 0, False)
        waves = math.ceil(config.simulations / config.wave_size)
        for _ in range(waves):
            paths: list[list[Edge]] = []
            expansions: list[tuple[int, Node, np.ndarray]] = []  # (path index, node, action)
            leaves: list[tuple[int, Node]] = []  # paths ending at an existing, trusted edge
            for _ in range(config.wave_size):
                node, path = root, []
                while True:
                    node.visits += VIRTUAL_LOSS
                    if node.terminal or node.depth >= config.max_depth:
                        leaves.append((len(paths), node))
                        break
                    if node.may_widen(config):
                        expansions.append((len(paths), node, self._propose(node, rng)))
                        break
                    edge = self._select(node)
                    if edge is None:  # every child untrusted: nothing certified below, stop here
                        leaves.append((len(paths), node))
                        break
                    edge.visits += VIRTUAL_LOSS
                    path.append(edge)
                    node = edge.child
                paths.append(path)
            # One batched ensemble call for all of this wave's expansions.
            if expansions:
                states = np.stack([node.state for _, node, _ in expansions])
                actions = np.stack([action for _, _, action in expansions])
                next_states, rewards, bounds, trusted, terminal = self._model_step(states, actions)
                for j, (path_index, node, action) in enumerate(expansions):
                    node.pending = 0
                    edge = Edge(action, float(rewards[j]), float(bounds[j]), bool(trusted[j]),
                                Node(next_states[j], node.depth + 1, bool(terminal[j])))
                    node.edges.append(edge)
                    if edge.trusted:
                        edge.visits += VIRTUAL_LOSS
                        paths[path_index].append(edge)
                        leaves.append((path_index, edge.child))
            # Leaf values: batched baseline rollouts in the model.
            leaf_values = {i: (0.0, 0.0) for i in range(len(paths))}
            evaluate = [(i, node) for i, node in leaves if paths[i] and not node.terminal]
            if evaluate:
                values, lower_bounds = self._rollout_values(np.stack([node.state for _, node in evaluate]))
                for (i, _), value, lower_bound in zip(evaluate, values, lower_bounds, strict=True):
                    leaf_values[i] = (float(value), float(lower_bound))
            # Backup G and G_lb along each path (the virtual loss already counted the visit).
            for i, path in enumerate(paths):
                value, lower_bound = leaf_values[i]
                for edge in reversed(path):
                    value = edge.reward + config.discount * value
                    lower_bound = edge.reward - edge.reward_bound + config.discount * lower_bound
                    edge.value_sum += value
                    edge.lower_bound_sum += lower_bound
        return self._decide(root)

    def _decide(self, root: Node) -> Decision:
        baseline_edge = root.edges[0]  # the root's first child is always the baseline's action
        others = [edge for edge in root.edges[1:] if edge.trusted and edge.visits > 0]
        baseline_value = baseline_edge.value if baseline_edge.visits else -math.inf
        best_value = max([edge.value for edge in others], default=-math.inf)
        best_lower_bound = max([edge.lower_bound for edge in others], default=-math.inf)
        chosen = None
        if self.config.switching == "greedy":
            candidates = others + ([baseline_edge] if baseline_edge.visits else [])
            chosen = max(candidates, key=lambda edge: edge.value, default=None)
            chosen = None if chosen is baseline_edge else chosen
        elif others and baseline_edge.trusted:
            best = max(others, key=lambda edge: edge.lower_bound)
            # Baseline-relative criterion: the certified lower bound must beat the baseline's value.
            if best.lower_bound > baseline_value + self.config.margin:
                chosen = best
        action = chosen.action if chosen is not None else baseline_edge.action
        return Decision(action=np.asarray(action, dtype=np.float64), switched=chosen is not None,
                        baseline_action=np.asarray(baseline_edge.action, dtype=np.float64),
                        baseline_value=float(baseline_value), best_lower_bound=float(best_lower_bound),
                        best_value=float(best_value),
                        trusted_root_actions=sum(edge.trusted for edge in root.edges),
                        untrusted_root_actions=sum(not edge.trusted for edge in root.edges),
                        simulations=self.config.simulations)
