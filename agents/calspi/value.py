"""The baseline's value V^b, learned from the offline dataset, with a calibrated error bound.

Why. A depth-3 search with a short model rollout sees ~10 steps ahead; on Hopper a run of small,
individually "better" departures from the baseline compounds over hundreds of steps into a fall that
no truncated rollout sees. The paper's baseline-relative criterion compares against a *value* of the
baseline; this module supplies it, for the search's leaves and for the comparison at the root.

Targets: discounted Monte Carlo returns-to-go of the dataset's episodes (the behaviour policy is the
baseline plus small Gaussian noise, so this is an on-policy evaluation of a near-baseline policy),
bootstrapped from the current estimate where an episode was cut by the time limit or by the end of
the dataset (not where it terminated):

    G_t = r_t + gamma * G_{t+1}                        inside an episode
    G_T = r_T + gamma * (1 - terminal_T) * V_k(s'_T)   at the last transition of an episode    (MC + bootstrap)

    V_{k+1} = argmin_theta sum_i (V_theta(s_i) - G_i)^2 over the training split, k = 0 .. iterations-1,

with V_0 = 0. Error certificate, like the dynamics model's: on the held-out split, the Wilks order
statistic of |V(s_i) - G_i| at coverage p and confidence gamma gives delta_V, so with probability
>= gamma at least a fraction p of states like the held-out ones have |V(s) - G(s)| <= delta_V
(G is a single-sample return, so delta_V also absorbs the return's own noise: conservative).

Bellman-residual bound (the value *function's* own inconsistency, without the return's noise): on the
same held-out split, the TD residual

    d_i = r_i + gamma * (1 - terminal_i) * V(s'_i) - V(s_i)                              (TD residual)

and delta_TD = the Wilks order statistic of |d_i| (same p, gamma). It is a one-step quantity: only
one reward's noise enters, not a whole return's. It does NOT bound |V - V^b| (that would need
delta_TD / (1 - gamma) in the sup norm); the planner's paired criterion uses it only for the
difference of V's errors at two leaf states of the same root, under an assumption stated there.

``lipschitz_term(states, error)`` = sum_j |dV/ds_j (s)| * error_j is the first-order bound on
|V(s_hat) - V(s)| when every coordinate of the model's state s_hat is within error_j of the real
state (a local linearisation, stated as such).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from gauntlet.agents.calspi.calibration import wilks_order_statistic


def returns_to_go(rewards: np.ndarray, terminals: np.ndarray, episode_ends: np.ndarray,
                  bootstrap: np.ndarray, discount: float) -> np.ndarray:
    """Discounted returns-to-go of consecutive transitions; ``bootstrap[i]`` = V(s'_i) is used where
    episode ``i`` was cut (episode end without termination, or the dataset's last transition)."""
    n = len(rewards)
    returns = np.zeros(n)
    following = 0.0
    for i in range(n - 1, -1, -1):
        if episode_ends[i] or i == n - 1:
            following = 0.0 if terminals[i] else float(bootstrap[i])
        following = float(rewards[i]) + discount * following
        returns[i] = following
    return returns


@dataclass
class ValueFitConfig:
    hidden: int = 128
    iterations: int = 3  # bootstrap refits at cut episode ends
    steps: int = 1500  # gradient steps per refit
    batch_size: int = 256
    learning_rate: float = 1e-3


class BaselineValue:
    """V^b(s) on raw observations; ``error_bound`` is delta_V (see the module docstring)."""

    def __init__(self, obs_dim: int, *, discount: float, seed: int = 0, config: ValueFitConfig | None = None):
        self.config, self.discount, self.seed = config or ValueFitConfig(), float(discount), int(seed)
        torch.manual_seed(seed)
        hidden = self.config.hidden
        self.network = nn.Sequential(nn.Linear(obs_dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                     nn.Linear(hidden, 1))
        self.obs_mean, self.obs_std = np.zeros(obs_dim), np.ones(obs_dim)
        self.value_mean, self.value_std = 0.0, 1.0
        self.error_bound = float("inf")  # delta_V
        self.td_error_bound = float("inf")  # delta_TD
        self.held_out_errors = np.zeros(0)
        self.held_out_td_residuals = np.zeros(0)

    def _inputs(self, states: np.ndarray) -> torch.Tensor:
        return torch.as_tensor((np.atleast_2d(states) - self.obs_mean) / self.obs_std, dtype=torch.float32)

    def __call__(self, states: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            out = self.network(self._inputs(states))[:, 0].numpy()
        return out.astype(np.float64) * self.value_std + self.value_mean

    def lipschitz_term(self, states: np.ndarray, error: np.ndarray) -> np.ndarray:
        """sum_j |dV/ds_j(s)| * error_j per state: first-order bound on the value error that a state
        error of at most ``error_j`` in each coordinate causes."""
        x = self._inputs(states).requires_grad_(True)
        (normalised_gradient,) = torch.autograd.grad(self.network(x).sum(), x)
        gradient = normalised_gradient.numpy().astype(np.float64) * self.value_std / self.obs_std  # dV/ds, raw units
        return np.sum(np.abs(gradient) * np.atleast_2d(error), axis=-1)

    def td_residuals(self, dataset, indices: np.ndarray) -> np.ndarray:
        """d_i = r_i + gamma (1 - terminal_i) V(s'_i) - V(s_i) for the given transitions."""
        following = (1.0 - dataset.terminals[indices].astype(np.float64)) * self(dataset.next_observations[indices])
        return dataset.rewards[indices] + self.discount * following - self(dataset.observations[indices])

    def fit(self, dataset, train: np.ndarray, held_out: np.ndarray, *, p: float, gamma: float) -> BaselineValue:
        """Fit on the training indices of ``dataset`` (an OfflineDataset in episode order), then
        calibrate delta_V on the held-out indices."""
        cfg = self.config
        self.obs_mean = dataset.observations[train].mean(axis=0)
        self.obs_std = np.maximum(dataset.observations[train].std(axis=0), 1e-6)
        generator = torch.Generator().manual_seed(self.seed)
        optimiser = torch.optim.Adam(self.network.parameters(), lr=cfg.learning_rate)
        bootstrap = np.zeros(len(dataset))
        for _ in range(cfg.iterations):
            returns = returns_to_go(dataset.rewards, dataset.terminals, dataset.episode_ends, bootstrap,
                                    self.discount)
            self.value_mean, self.value_std = float(returns[train].mean()), float(max(returns[train].std(), 1e-3))
            x = self._inputs(dataset.observations[train])
            y = torch.as_tensor((returns[train] - self.value_mean) / self.value_std, dtype=torch.float32)
            for _ in range(cfg.steps):
                index = torch.randint(len(x), (cfg.batch_size,), generator=generator)
                loss = ((self.network(x[index])[:, 0] - y[index]) ** 2).mean()
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
            bootstrap = self(dataset.next_observations)
        # delta_V: Wilks upper tolerance bound of |V(s) - G| on the held-out split.
        self.held_out_errors = np.abs(self(dataset.observations[held_out]) - returns[held_out])
        rank = wilks_order_statistic(len(held_out), p, gamma)
        self.error_bound = float(np.sort(self.held_out_errors)[rank - 1])
        # delta_TD: Wilks upper tolerance bound of the TD residual |r + gamma (1 - d) V(s') - V(s)|.
        self.held_out_td_residuals = self.td_residuals(dataset, held_out)
        self.td_error_bound = float(np.sort(np.abs(self.held_out_td_residuals))[rank - 1])
        self.returns = returns
        return self
