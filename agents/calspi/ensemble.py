"""Probabilistic MLP ensemble dynamics model (PETS / MBPO style) with elites chosen on validation.

Each of N members maps a normalised (s, a) to a Gaussian over the normalised target
y = (s' - s, r): mean mu_i(s, a) and log-variance log sigma^2_i(s, a), trained on the training split with

    L_i = mean_j [ (y_j - mu_i)^2 exp(-log sigma_i^2) + log sigma_i^2 ]
          + 0.01 (sum max_logvar - sum min_logvar)                            (Gaussian NLL, PETS)

with soft bounds on the log-variance. The ``n_elites`` members with the lowest validation MSE are the
elites; predictions use the elites' mean and their disagreement (standard deviation of the elites'
means), the quantity Cal-SPI calibrates. All members run in one batched matrix product per layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn


class EnsembleLinear(nn.Module):
    """N independent linear layers applied in one batched matmul: (N, B, in) -> (N, B, out)."""

    def __init__(self, members: int, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(members, in_features, out_features))
        self.bias = nn.Parameter(torch.zeros(members, 1, out_features))
        for member in range(members):
            nn.init.kaiming_uniform_(self.weight.data[member].T, a=5**0.5)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, inputs, self.weight)


class ProbabilisticEnsemble(nn.Module):
    """N Gaussian MLPs over normalised targets, with PETS's soft log-variance bounds."""

    def __init__(self, in_dim: int, out_dim: int, members: int, hidden: int, layers: int):
        super().__init__()
        sizes = [in_dim] + [hidden] * layers
        self.hidden = nn.ModuleList(EnsembleLinear(members, a, b) for a, b in zip(sizes[:-1], sizes[1:], strict=True))
        self.head = EnsembleLinear(members, hidden, 2 * out_dim)
        self.max_logvar = nn.Parameter(torch.full((1, 1, out_dim), 0.5))
        self.min_logvar = nn.Parameter(torch.full((1, 1, out_dim), -10.0))
        self.out_dim = out_dim

    def forward(self, inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = inputs
        for layer in self.hidden:
            hidden = torch.nn.functional.silu(layer(hidden))
        mean, raw_logvar = self.head(hidden).split(self.out_dim, dim=-1)
        logvar = self.max_logvar - torch.nn.functional.softplus(self.max_logvar - raw_logvar)
        logvar = self.min_logvar + torch.nn.functional.softplus(logvar - self.min_logvar)
        return mean, logvar


@dataclass
class Normaliser:
    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, data: np.ndarray) -> Normaliser:
        return cls(data.mean(axis=0), np.maximum(data.std(axis=0), 1e-6))


@dataclass
class Prediction:
    """Elite predictions for a batch of (s, a): next state and reward in env units; disagreement in
    normalised target units (the calibrated quantity)."""

    next_states: np.ndarray  # (B, obs_dim)
    rewards: np.ndarray  # (B,)
    normalised_mean: np.ndarray  # (B, obs_dim + 1)
    disagreement: np.ndarray  # (B, obs_dim + 1): std of the elites' means, normalised units

    @property
    def state_disagreement(self) -> np.ndarray:
        return self.disagreement[:, :-1]

    @property
    def reward_disagreement(self) -> np.ndarray:
        return self.disagreement[:, -1]


class EnsembleDynamics:
    """Trains the ensemble on (s, a, s', r), picks elites on validation, and predicts in batches."""

    # Set by ``fit``: the normalisation of the inputs (s, a) and of the targets (s' - s, r).
    input_norm: Normaliser
    target_norm: Normaliser

    def __init__(self, obs_dim: int, act_dim: int, *, members: int = 7, elites: int = 5, hidden: int = 200,
                 layers: int = 3, seed: int = 0):
        if not 1 <= elites <= members:
            raise ValueError(f"elites must be between 1 and the number of members ({members}), got {elites}")
        self.obs_dim, self.act_dim, self.members, self.n_elites = obs_dim, act_dim, members, elites
        self.seed = seed
        torch.manual_seed(seed)
        self.network = ProbabilisticEnsemble(obs_dim + act_dim, obs_dim + 1, members, hidden, layers)
        self.elites = np.arange(elites)

    @staticmethod
    def targets(states: np.ndarray, next_states: np.ndarray, rewards: np.ndarray) -> np.ndarray:
        return np.concatenate([next_states - states, rewards[:, None]], axis=1)

    def fit(self, states: np.ndarray, actions: np.ndarray, next_states: np.ndarray, rewards: np.ndarray, *,
            validation: tuple[np.ndarray, ...], epochs: int = 40, batch_size: int = 256,
            learning_rate: float = 1e-3) -> dict[str, list[float]]:
        """Train every member on bootstrap resamples of the training split, then choose elites by
        validation MSE (``validation`` = (states, actions, next_states, rewards))."""
        inputs = np.concatenate([states, actions], axis=1)
        targets = self.targets(states, next_states, rewards)
        self.input_norm, self.target_norm = Normaliser.fit(inputs), Normaliser.fit(targets)
        x = torch.as_tensor((inputs - self.input_norm.mean) / self.input_norm.std, dtype=torch.float32)
        y = torch.as_tensor((targets - self.target_norm.mean) / self.target_norm.std, dtype=torch.float32)
        generator = torch.Generator().manual_seed(self.seed)
        n = len(x)
        # Bootstrap: each member trains on its own resample of the training split.
        bootstrap = torch.randint(n, (self.members, n), generator=generator)
        optimiser = torch.optim.Adam(self.network.parameters(), lr=learning_rate, weight_decay=1e-5)
        history: dict[str, list[float]] = {"train_nll": [], "validation_mse": []}
        for _ in range(epochs):
            order = bootstrap[:, torch.randperm(n, generator=generator)]
            for start in range(0, n, batch_size):
                index = order[:, start:start + batch_size]
                mean, logvar = self.network(x[index])
                inverse_variance = torch.exp(-logvar)
                # Gaussian NLL (PETS), plus the soft log-variance bound regulariser.
                loss = (((mean - y[index]) ** 2) * inverse_variance + logvar).mean()
                loss = loss + 0.01 * (self.network.max_logvar.sum() - self.network.min_logvar.sum())
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
            history["train_nll"].append(loss.item())
            history["validation_mse"].append(float(self.member_errors(*validation).mean()))
        self.elites = np.argsort(self.member_errors(*validation))[: self.n_elites]
        return history

    @torch.no_grad()
    def _member_means(self, states: np.ndarray, actions: np.ndarray, members: np.ndarray | None = None) -> torch.Tensor:
        inputs = np.concatenate([states, actions], axis=1)
        x = torch.as_tensor((inputs - self.input_norm.mean) / self.input_norm.std, dtype=torch.float32)
        mean, _ = self.network(x.unsqueeze(0).expand(self.members, -1, -1))
        return mean if members is None else mean[torch.as_tensor(members)]

    def member_errors(self, states: np.ndarray, actions: np.ndarray, next_states: np.ndarray,
                      rewards: np.ndarray) -> np.ndarray:
        """Validation MSE of every member, in normalised target units."""
        y = (self.targets(states, next_states, rewards) - self.target_norm.mean) / self.target_norm.std
        mean = self._member_means(states, actions).numpy()
        return ((mean - y[None]) ** 2).mean(axis=(1, 2))

    def predict(self, states: np.ndarray, actions: np.ndarray) -> Prediction:
        """Elite-mean prediction and elite disagreement for a batch (one batched forward pass)."""
        means = self._member_means(states, actions, self.elites).numpy()
        normalised_mean = means.mean(axis=0)
        disagreement = means.std(axis=0)
        raw = normalised_mean * self.target_norm.std + self.target_norm.mean
        return Prediction(next_states=states + raw[:, :-1], rewards=raw[:, -1],
                          normalised_mean=normalised_mean, disagreement=disagreement)

    def normalised_targets(self, states: np.ndarray, next_states: np.ndarray, rewards: np.ndarray) -> np.ndarray:
        return (self.targets(states, next_states, rewards) - self.target_norm.mean) / self.target_norm.std
