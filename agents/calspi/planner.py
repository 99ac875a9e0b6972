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

Multi-step error bound. The certificate bounds one step: |s'_j - s_hat'_j| <= e_j = q_hat (sigma_j + eps)
std_j per coordinate j (raw units). Along a path the errors compound; for a model that is
non-expansive in the state (Lipschitz constant L_f = 1, an assumption we state rather than estimate)
the triangle inequality gives the accumulated bound

    E_t = E_{t-1} + e_t,   E_0 = 0                                            (accumulated state error)

and the gate also bounds the sum of the one-step normalised bounds B_t = sum_{k<=t} max_j q_hat (sigma_kj + eps):
a transition is trusted only if its own bound is within the tolerance tau AND B_t <= path_tolerance * tau.
By the union bound the whole path of d certified steps holds with probability >= 1 - d (1 - p).

Leaf value. A model rollout of the baseline for ``rollout_horizon`` steps, then the learned baseline
value V^b (``value.BaselineValue``, fitted on the dataset's returns) at the last state. For every
path the search backs up two returns:
    G    = sum_t gamma^t r_hat_t + gamma^h V^b(s_h)                                        (model value)
    G_lb = sum_t gamma^t (r_hat_t - b_r,t) + gamma^h (V^b(s_h) - |grad V^b(s_h)| . E_h - delta_V)
                                                                                   (certified lower bound)
where b_r,t = q_hat (sigma_r + eps) is the certified reward bound, |grad V^b| . E_h the first-order
value error caused by the accumulated state error, and delta_V the calibrated error of V^b itself.
Once a rollout step is untrusted nothing below it is certified: G_lb takes r_floor (the dataset's
smallest reward) for each remaining step and the worst-case value r_floor / (1 - gamma) at the leaf.
Terminal check: a predicted terminal state ends the path (no leaf value). A state that *could* be
terminal within its accumulated error box (``is_terminal`` true at s_hat +- E_j e_j for some j; exact
for termination rules that threshold single coordinates, as Hopper's and the pendulum's do) caps
G_lb below it at min(0, G_lb): if the episode ends there, nothing more is earned.
Without a value model (``value=None``) the leaf value is 0 and only the rollout is summed.

Batching. Simulations run in waves of ``wave_size`` with a virtual loss; each wave makes one batched
ensemble call for all its expansions and one per rollout step for all its leaves.

Root switch (baseline-relative criterion):
    switch  iff  the best trusted root action a+ != pi_b(s)  and  LB(a+) > V^b(s) + margin,
where LB(a+) is its mean certified lower bound and V^b(s) the learned baseline value at the real
root state (without a value model: Q_hat(pi_b(s)), the model value of the baseline's action);
otherwise act with pi_b(s).

Paired root switch (``switching="paired"``, the baseline-relative criterion as a paired difference).
Both sides of the comparison above share V^b, yet the unpaired rule charges V^b's error delta_V to the
search side only, and delta_V (a bound on |V^b - G| for single noisy returns) is mostly return noise.
The paired rule compares a+ with the baseline's *own* edge at the same root, evaluated in the same
model, at the same rollout horizon, with the same V^b at the leaves. Every path also backs up an
upper bound
    G_ub = sum_t gamma^t (r_hat_t + b_r,t) + gamma^h (V^b(s_h) + |grad V^b(s_h)| . E_h)   (certified upper bound)
(an uncertified step takes r_ceil, the dataset's largest reward, and r_ceil / (1 - gamma) at the leaf;
a state that may be terminal lifts G_ub to max(0, G_ub)), and G_lb drops delta_V. Then
    switch  iff  LB(a+) - UB(pi_b(s)) > delta_TD + margin                              (paired criterion)
with delta_TD the calibrated Bellman-residual bound of V^b (``value.BaselineValue.td_error_bound``).
The model's reward and state errors are charged on *both* paths (lower on one, upper on the other).
What replaces delta_V is an assumption, stated rather than proven: the errors of V^b at the two leaf
states, which descend from the same root by the same number of steps, differ by at most delta_TD
(the common-mode part of V^b's error cancels in the difference; gamma^h <= 1 is dropped, which only
makes the rule stricter). The rule still never switches when the baseline's root edge is untrusted.
Tighter certificates (options; ``certificates`` module): ``value_bound="local"`` charges a
state-dependent delta_V(s_h) (``value.local_error_bound``: a bootstrap ensemble of V^b fits, or a
binned calibration) instead of the global delta_V; ``state_value_term="value-aware"`` replaces
|grad V^b(s_h)| . E_h by the sum over the path's model steps of the certified one-step value error
|V^b(s') - V^b(s_hat')| (``certificates.ValueAwareBound``; exact for one step, additive over steps by
assumption), in both G_lb and G_ub.
Variants for the ablations: ``gate=False`` trusts every edge;
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
    rollout_horizon: int = 4
    discount: float = 0.99
    exploration: float = 1.0  # c in UCT, in units of the reward scale
    widening_k: float = 1.0  # progressive widening: children <= ceil(k * N^alpha)
    widening_alpha: float = 0.5
    perturbation: float = 0.3  # sigma_pw, fraction of the half action range
    margin: float = 0.0  # switch only if LB beats the baseline value by more than this
    gate: bool = True
    switching: str = "certified"  # "certified" (Cal-SPI) or "greedy" (ablations)
    penalty: float = 0.0  # MOPO-style lambda
    path_tolerance: float = 2.0  # accumulated bound B_t must stay <= path_tolerance * tau (inf: off)
    value_error: float = 1.0  # weight of delta_V in the leaf lower bound (1: the certified bound; unused when paired)
    value_bound: str = "global"  # delta_V: "global" (one Wilks bound) or "local" (value.local_error_bound(s))
    state_value_term: str = "gradient"  # "gradient": |grad V^b| . E; "value-aware": certified |V^b(s') - V^b(s_hat')|

    def __post_init__(self) -> None:
        if self.switching not in ("certified", "paired", "greedy"):
            raise ValueError(f"switching must be 'certified', 'paired' or 'greedy', got {self.switching!r}")
        if self.value_bound not in ("global", "local"):
            raise ValueError(f"value_bound must be 'global' or 'local', got {self.value_bound!r}")
        if self.state_value_term not in ("gradient", "value-aware"):
            raise ValueError(f"state_value_term must be 'gradient' or 'value-aware', got {self.state_value_term!r}")
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
    upper_bound_sum: float = 0.0

    @property
    def value(self) -> float:
        return self.value_sum / self.visits if self.visits else -math.inf

    @property
    def lower_bound(self) -> float:
        return self.lower_bound_sum / self.visits if self.visits else -math.inf

    @property
    def upper_bound(self) -> float:
        return self.upper_bound_sum / self.visits if self.visits else math.inf


@dataclass
class Node:
    state: np.ndarray
    depth: int
    terminal: bool
    error: np.ndarray | float = 0.0  # E_t, accumulated certified state error (raw units, per coordinate)
    path_bound: float = 0.0  # B_t, accumulated one-step normalised bounds
    maybe_terminal: bool = False  # terminal somewhere within the error box
    value_error: float = 0.0  # accumulated certified one-step value errors (state_value_term="value-aware")
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
    root_actions: list[np.ndarray] = field(default_factory=list)  # every root action the search tried
    root_trusted: list[bool] = field(default_factory=list)
    baseline_upper_bound: float = math.nan  # UB(pi_b(s)), paired criterion only
    value_term: float = math.nan  # what the switch charged for V^b's error: delta_TD (paired)

    def as_event_data(self, certificate: Certificate) -> dict[str, Any]:
        return {"switched": self.switched, "certificate": certificate.as_dict(),
                "baseline_value": self.baseline_value, "best_lower_bound": self.best_lower_bound,
                "best_value": self.best_value, "baseline_upper_bound": self.baseline_upper_bound,
                "value_term": self.value_term, "trusted_root_actions": self.trusted_root_actions,
                "untrusted_root_actions": self.untrusted_root_actions, "simulations": self.simulations,
                "action": self.action.tolist(), "baseline_action": self.baseline_action.tolist()}


class GatedSearch:
    """Cal-SPI's gated tree search from one root state (see the module docstring)."""

    def __init__(self, model: EnsembleDynamics, certificate: Certificate, baseline: Callable[[np.ndarray], np.ndarray],
                 is_terminal: Callable[[np.ndarray], np.ndarray], action_low: np.ndarray, action_high: np.ndarray,
                 *, reward_floor: float, reward_scale: float, config: SearchConfig | None = None,
                 value: Any = None, reward_ceiling: float = math.inf, value_aware: Any = None):
        self.model, self.certificate, self.baseline, self.is_terminal = model, certificate, baseline, is_terminal
        self.value = value  # BaselineValue or None
        self.action_low, self.action_high = np.asarray(action_low, float), np.asarray(action_high, float)
        self.reward_floor, self.reward_scale = float(reward_floor), float(reward_scale)
        self.reward_ceiling = float(reward_ceiling)  # r_ceil for the upper bound of uncertified steps
        self.config = config or SearchConfig()
        self.value_aware = value_aware  # certificates.ValueAwareBound or None
        if self.config.state_value_term == "value-aware" and (value_aware is None or value is None):
            raise ValueError("state_value_term='value-aware' needs a value model and a fitted ValueAwareBound "
                             "(ModelConfig(value_aware='global' or 'local'))")
        if self.config.value_bound == "local" and not hasattr(value, "local_error_bound"):
            raise ValueError("value_bound='local' needs a value model with local_error_bound "
                             "(ModelConfig(value_members >= 2 or value_local='binned'))")
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
        # One-step certified state bounds: normalised max (gated) and per coordinate in raw units (e_t).
        normalised = self.certificate.error_bound(prediction.state_disagreement)
        step_bound = normalised.max(axis=-1)
        step_error = normalised * self.model.target_norm.std[:-1]
        trusted = self.certificate.trusted(prediction.state_disagreement) if self.config.gate \
            else np.ones(len(states), dtype=bool)
        terminal = self.is_terminal(prediction.next_states)
        # Certified one-step value error (value-aware score), used only with state_value_term="value-aware".
        step_value = self.value_aware(prediction.state_disagreement) if self.value_aware is not None \
            else np.zeros(len(states))
        return prediction.next_states, rewards, reward_bounds, trusted, terminal, step_bound, step_error, step_value

    def _within_path_tolerance(self, path_bound: np.ndarray) -> np.ndarray:
        """The multi-step gate: accumulated bound B_t <= path_tolerance * tau (always true without the gate)."""
        if not self.config.gate:
            return np.ones(np.shape(path_bound), dtype=bool)
        return np.asarray(path_bound) <= self.config.path_tolerance * self.certificate.tolerance

    def _maybe_terminal(self, states: np.ndarray, errors: np.ndarray) -> np.ndarray:
        """Could the state be terminal within its error box? is_terminal at s_hat +- E_j in each coordinate."""
        errors = np.broadcast_to(errors, states.shape)
        result = self.is_terminal(states).copy()
        for j in range(states.shape[1]):
            if not np.any(errors[:, j] > 0):
                continue
            for sign in (1.0, -1.0):
                moved = states.copy()
                moved[:, j] += sign * errors[:, j]
                result |= self.is_terminal(moved)
        return result

    def _leaf_bounds(self, states: np.ndarray, errors: np.ndarray,
                     value_errors: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """V^b(s), its lower bound V^b(s) - |grad V^b| . E - delta_V and upper bound V^b(s) + |grad V^b| . E
        (all 0 without a value model). The paired criterion charges V^b's own error at the root
        instead (delta_TD), so its leaf lower bound has no delta_V."""
        if self.value is None:
            zeros = np.zeros(len(states))
            return zeros, zeros, zeros
        values = self.value(states)
        if self.config.state_value_term == "value-aware":  # summed certified one-step value errors
            state_term = np.zeros(len(states)) if value_errors is None else np.asarray(value_errors, dtype=np.float64)
        else:  # first-order term |grad V^b| . E
            state_term = self.value.lipschitz_term(states, errors)
        delta_v = self.value.local_error_bound(states) if self.config.value_bound == "local" \
            else self.value.error_bound
        value_error = 0.0 if self.config.switching == "paired" else self.config.value_error * delta_v
        return values, values - state_term - value_error, values + state_term

    def _rollout_values(self, states: np.ndarray, errors: np.ndarray, path_bounds: np.ndarray,
                        maybe_terminal: np.ndarray,
                        value_errors: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Baseline rollouts in the model from a batch of leaf states, ending at V^b: (G, G_lb, G_ub) per leaf."""
        config, count = self.config, len(states)
        states, errors = states.copy(), np.array(np.broadcast_to(errors, states.shape), dtype=np.float64)
        path_bounds, maybe_terminal = np.array(path_bounds, dtype=np.float64), np.array(maybe_terminal, dtype=bool)
        value_errors = np.zeros(count) if value_errors is None else np.array(value_errors, dtype=np.float64)
        values, lower_bounds, upper_bounds = np.zeros(count), np.zeros(count), np.zeros(count)
        alive, certified, discount = np.ones(count, dtype=bool), np.ones(count, dtype=bool), 1.0
        floor_value = self.reward_floor / (1.0 - config.discount) if config.discount < 1 else self.reward_floor
        ceiling_value = self.reward_ceiling / (1.0 - config.discount) if config.discount < 1 else self.reward_ceiling
        for _ in range(config.rollout_horizon):
            if not alive.any():
                break
            index = np.flatnonzero(alive)
            next_states, rewards, bounds, trusted, terminal, step_bound, step_error, step_value = self._model_step(
                states[index], self.baseline(states[index]))
            path_bounds[index] += step_bound
            value_errors[index] += step_value
            errors[index] += step_error
            certified[index] &= trusted & self._within_path_tolerance(path_bounds[index])
            values[index] += discount * rewards
            lower_bounds[index] += discount * np.where(certified[index], rewards - bounds, self.reward_floor)
            upper_bounds[index] += discount * np.where(certified[index], rewards + bounds, self.reward_ceiling)
            states[index] = next_states
            alive[index[terminal]] = False
            maybe_terminal[index] |= self._maybe_terminal(next_states, errors[index])
            discount *= config.discount
        # Leaf value at the rollout's last state (none where the model predicts termination).
        index = np.flatnonzero(alive)
        if len(index):
            leaf_values, leaf_lower, leaf_upper = self._leaf_bounds(states[index], errors[index], value_errors[index])
            leaf_lower = np.where(certified[index], leaf_lower, floor_value if self.value is not None else 0.0)
            leaf_lower = np.where(maybe_terminal[index], np.minimum(leaf_lower, 0.0), leaf_lower)
            leaf_upper = np.where(certified[index], leaf_upper, ceiling_value if self.value is not None else 0.0)
            leaf_upper = np.where(maybe_terminal[index], np.maximum(leaf_upper, 0.0), leaf_upper)
            values[index] += discount * leaf_values
            lower_bounds[index] += discount * leaf_lower
            upper_bounds[index] += discount * leaf_upper
        return values, lower_bounds, upper_bounds

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
                next_states, rewards, bounds, trusted, terminal, step_bound, step_error, step_value = \
                    self._model_step(states, actions)
                path_bounds = np.array([node.path_bound for _, node, _ in expansions]) + step_bound
                errors = np.stack([np.broadcast_to(node.error, node.state.shape) for _, node, _ in expansions]) \
                    + step_error
                # The gate: one-step certificate within tau, and the accumulated bound within the path tolerance.
                trusted = trusted & self._within_path_tolerance(path_bounds)
                maybe_terminal = self._maybe_terminal(next_states, errors) if self.config.gate else terminal
                for j, (path_index, node, action) in enumerate(expansions):
                    node.pending = 0
                    edge = Edge(action, float(rewards[j]), float(bounds[j]), bool(trusted[j]),
                                Node(next_states[j], node.depth + 1, bool(terminal[j]), errors[j],
                                     float(path_bounds[j]), bool(maybe_terminal[j]),
                                     node.value_error + float(step_value[j])))
                    node.edges.append(edge)
                    if edge.trusted:
                        edge.visits += VIRTUAL_LOSS
                        paths[path_index].append(edge)
                        leaves.append((path_index, edge.child))
            # Leaf values: batched baseline rollouts in the model, ending at V^b.
            leaf_values = {i: (0.0, 0.0, 0.0) for i in range(len(paths))}
            evaluate = [(i, node) for i, node in leaves if paths[i] and not node.terminal]
            if evaluate:
                nodes = [node for _, node in evaluate]
                values, lower_bounds, upper_bounds = self._rollout_values(
                    np.stack([node.state for node in nodes]),
                    np.stack([np.broadcast_to(node.error, node.state.shape) for node in nodes]),
                    np.array([node.path_bound for node in nodes]), np.array([node.maybe_terminal for node in nodes]),
                    np.array([node.value_error for node in nodes]))
                for (i, _), value, lower_bound, upper_bound in zip(evaluate, values, lower_bounds, upper_bounds,
                                                                    strict=True):
                    leaf_values[i] = (float(value), float(lower_bound), float(upper_bound))
            # Backup G, G_lb and G_ub along each path (the virtual loss already counted the visit).
            for i, path in enumerate(paths):
                value, lower_bound, upper_bound = leaf_values[i]
                for edge in reversed(path):
                    if edge.child.maybe_terminal:  # the episode may end here: nothing more is certain
                        lower_bound, upper_bound = min(lower_bound, 0.0), max(upper_bound, 0.0)
                    value = edge.reward + config.discount * value
                    lower_bound = edge.reward - edge.reward_bound + config.discount * lower_bound
                    upper_bound = edge.reward + edge.reward_bound + config.discount * upper_bound
                    edge.value_sum += value
                    edge.lower_bound_sum += lower_bound
                    edge.upper_bound_sum += upper_bound
        self.last_root = root  # kept for auditing the tree (tests, coverage)
        return self._decide(root)

    def _decide(self, root: Node) -> Decision:
        baseline_edge = root.edges[0]  # the root's first child is always the baseline's action
        others = [edge for edge in root.edges[1:] if edge.trusted and edge.visits > 0]
        if self.value is not None and self.config.switching == "certified":
            baseline_value = float(self.value(root.state[None])[0])  # V^b at the real root state
        else:
            baseline_value = baseline_edge.value if baseline_edge.visits else -math.inf
        best_value = max([edge.value for edge in others], default=-math.inf)
        best_lower_bound = max([edge.lower_bound for edge in others], default=-math.inf)
        chosen, baseline_upper_bound, value_term = None, math.nan, math.nan
        if self.config.switching == "paired":
            # Paired criterion: LB(a+) - UB(pi_b(s)) > delta_TD + margin, both from this root's tree.
            baseline_upper_bound = baseline_edge.upper_bound
            value_term = self.value.td_error_bound if self.value is not None else 0.0
            baseline_value = baseline_upper_bound + value_term  # what LB(a+) has to beat (logged as such)
            if others and baseline_edge.trusted and baseline_edge.visits:
                best = max(others, key=lambda edge: edge.lower_bound)
                if best.lower_bound > baseline_value + self.config.margin:
                    chosen = best
        elif self.config.switching == "greedy":
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
                        best_value=float(best_value), baseline_upper_bound=float(baseline_upper_bound),
                        value_term=float(value_term),
                        trusted_root_actions=sum(edge.trusted for edge in root.edges),
                        untrusted_root_actions=sum(not edge.trusted for edge in root.edges),
                        simulations=self.config.simulations,
                        root_actions=[np.asarray(edge.action, dtype=np.float64) for edge in root.edges],
                        root_trusted=[bool(edge.trusted) for edge in root.edges])
