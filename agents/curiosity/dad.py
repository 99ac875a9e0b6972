"""A curious design network trained on the ``icl_lp`` reward of LocationFinding-v0 (DAD-style).

The policy is a Deep Adaptive Design network (Foster et al. 2021, DAD, section 4): a permutation-
invariant history encoder and an emitter,

    R(h_t) = Σ_{i<=t} E_ψ(ξ_i, y_i)        (sum pooling: the design only depends on the set of pairs)
    ξ_{t+1} = 4 · tanh(F_ψ(R(h_t)))         (the emitter; designs stay in the env's square [−4, 4]²)

It is trained on the curiosity reward alone, never on θ or the information gain. The return of an
episode is the sum of the ICL learning-progress rewards of ``gauntlet.envs.curiosity.lp``, which
telescopes for any in-context learner (the probes are fixed for the episode):

    Σ_{t=1}^{T} icl_lp_t = Σ_j q_j [ ℓ(ỹ_j | x̃_j, C_0) − ℓ(ỹ_j | x̃_j, C_T) ],   ℓ = −log p          (return)

The learner here is the env's own exact learner family, self-normalised importance sampling over
prior particles (``ParticleLearner``), with ``n_particles`` fresh particles per training batch so the
policy cannot fit one particle set. With ``include_truth`` (the "contrastive" configs) each
history's learner also holds that history's own θ as one particle, θ_0 beside θ_1..θ_P ~ p(θ), exactly as the
contrastive set of sPCE (DAD eq. 7) does:

    w_p ∝ Π_t N(y_t; μ(ξ_t, θ_p), σ²),  p(ỹ | x̃, C) = Σ_{p=0}^{P} w_p N(ỹ; μ(x̃, θ_p), σ²)   (contrastive learner)

The return is still the summed icl_lp of a particle learner, read off its prediction errors on the
probes (a test checks it against the env's rewards); θ only decides which particles the learner
holds, and the policy never sees it. Without θ_0 the posterior of a few hundred prior particles
collapses onto the nearest one within a few designs, after which no design changes the learner's
predictions: the return stops rewarding information and its gradient vanishes. With θ_0 the
posterior keeps concentrating on θ_0 as designs rule out the other particles, so more informative
designs keep earning learning progress. The probes are the env's: x̃ ~ N(0, I), ỹ ~ p(· | x̃, θ). The
return is differentiable in the designs, both directly and through the outcomes
y_t = μ(ξ_t, θ) + σ ε_t (reparameterised), so the network is trained by pathwise gradients (DAD's
estimator, applied to the ICL-LP return instead of sPCE). ``total_icl_lp`` computes the return; a
test checks that it equals the sum of the env's ``icl_lp`` rewards with the same particles.

Training (``build``) is deterministic given its config (seeded, one torch thread) and writes the
weights into the data cache (``ensure_built("curiosity-dad-policy", ...)``; ``gauntlet data build
curiosity-dad-policy`` builds the default).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from gauntlet.agent import Agent
from gauntlet.agents.curiosity.data_versions import DAD_POLICY as DATA_NAME
from gauntlet.agents.curiosity.data_versions import DAD_POLICY_VERSION as DATA_VERSION
from gauntlet.datacache import ensure_built
from gauntlet.envs.curiosity.location_finding_model import (DESIGN_BOUND, LocationFindingModel, intensity_torch,
                                                            observed_history, paired_intensity_torch)


@dataclass(frozen=True)
class DADConfig(LocationFindingModel):
    """The env's model (``LocationFindingModel``'s fields, LocationFinding-v0 defaults), the learner, the
    network and the training budget."""

    n_probes: int = 32
    n_particles: int = 512
    batch_size: int = 32
    steps: int = 1500
    learning_rate: float = 1e-3
    max_grad_norm: float = 1.0
    hidden: int = 128
    encoding: int = 64
    seed: int = 0
    # The learner's particle set for a history also holds that history's own θ (the contrastive particle
    # learner, as θ_0 in sPCE): without it the learner's posterior collapses onto the nearest of a few
    # hundred prior particles after a handful of designs and later designs earn no learning progress.
    include_truth: bool = False


CONFIGS = {"default": DADConfig(),
           # The contrastive learner (the truth among the particles), twice the histories per step and a
           # higher learning rate: the config that learns (docs/results/curiosity.md, result (iii)).
           "contrastive": DADConfig(include_truth=True, batch_size=64, learning_rate=3e-3, steps=3000),
           # The same with four times the particles (the posterior rules them out more slowly) for 1,200 steps.
           "contrastive-sharp": DADConfig(include_truth=True, n_particles=2048, batch_size=64, learning_rate=3e-3,
                                          steps=1200),
           # Twice the particles (a sharper learner late in the episode) for half the steps: the same cost.
           "wide": DADConfig(n_particles=1024, steps=800),
           # A sharper learner still (4096 particles) on fewer histories and steps: again the same cost.
           "sharp": DADConfig(n_particles=4096, batch_size=16, steps=400),
           "smoke": DADConfig(horizon=6, n_particles=128, batch_size=8, steps=20, hidden=32, encoding=16)}


class DesignNetwork(nn.Module):
    """History encoder E_ψ (per pair, sum-pooled), a design schedule and an emitter F_ψ.

    ξ_{t+1} = 4 tanh(s_t + F_ψ(R(h_t))): s_t is a learned base design for step t (t = |h_t|, itself a
    permutation-invariant function of the history) and F_ψ the adaptive correction. The schedule
    starts as designs drawn from the sources' prior N(0, I) and F_ψ's last layer starts at zero, so
    the untrained network is a prior-random design and training only has to improve on it.
    """

    def __init__(self, config: DADConfig):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(3, config.hidden), nn.ReLU(), nn.Linear(config.hidden, config.hidden),
                                     nn.ReLU(), nn.Linear(config.hidden, config.encoding))
        self.emitter = nn.Sequential(nn.Linear(config.encoding, config.hidden), nn.ReLU(),
                                     nn.Linear(config.hidden, config.hidden), nn.ReLU(), nn.Linear(config.hidden, 2))
        last = cast(nn.Linear, self.emitter[-1])
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)
        start = torch.randn(config.horizon, 2, generator=torch.Generator().manual_seed(config.seed))
        self.schedule = nn.Parameter(torch.atanh((start / DESIGN_BOUND).clamp(-0.95, 0.95)))

    def encode(self, designs: torch.Tensor, outcomes: torch.Tensor) -> torch.Tensor:
        """E_ψ of pairs ``designs (..., 2)`` (env units) and ``outcomes (...)`` -> ``(..., encoding)``."""
        return self.encoder(torch.cat([designs / DESIGN_BOUND, outcomes[..., None]], dim=-1))

    def emit(self, pooled: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
        """The next design from the pooled history ``(B, encoding)`` and its size ``steps (B,)``."""
        base = self.schedule[steps.clamp(max=len(self.schedule) - 1)]
        return DESIGN_BOUND * torch.tanh(base + self.emitter(pooled))

    def forward(self, designs: torch.Tensor, outcomes: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The next design for histories ``designs (B, N, 2)``, ``outcomes (B, N)``, ``mask (B, N)``."""
        pooled = (self.encode(designs, outcomes) * mask[..., None]).sum(dim=1)
        return self.emit(pooled, mask.sum(dim=1).round().long())


def total_icl_lp(particles: torch.Tensor, designs: torch.Tensor, outcomes: torch.Tensor, probe_x: torch.Tensor,
                 probe_y: torch.Tensor, config: DADConfig,
                 true_thetas: torch.Tensor | None = None) -> torch.Tensor:
    """Equation (return) for the particle learner: ``(B,)`` from histories ``designs (B, T, 2)``, ``outcomes (B, T)``.

    p(ỹ | x̃, C) = Σ_p w_p N(ỹ; μ(x̃, θ_p), σ²) with w_p ∝ Π_t N(y_t; μ(ξ_t, θ_p), σ²) (ParticleLearner);
    ``probe_x (B, M, 2)``, ``probe_y (B, M)``, uniform probe weights. With ``true_thetas (B, K, 2)`` the
    particle set of history b is {θ_b} ∪ particles (the contrastive particle learner, P + 1 particles).
    """
    variance = config.noise_std ** 2
    log_lik = (-0.5 * (outcomes[..., None] - intensity_torch(designs, particles, config)) ** 2 / variance).sum(1)
    probe_log_lik = -0.5 * (probe_y[..., None] - intensity_torch(probe_x, particles, config)) ** 2 / variance
    if true_thetas is not None:
        own = lambda x: torch.diagonal(intensity_torch(x, true_thetas, config), dim1=0, dim2=2).T
        log_lik = torch.cat([(-0.5 * (outcomes - own(designs)) ** 2 / variance).sum(1)[:, None], log_lik], dim=-1)
        probe_log_lik = torch.cat([(-0.5 * (probe_y - own(probe_x)) ** 2 / variance)[..., None],
                                   probe_log_lik.expand(len(probe_y), -1, -1)], dim=-1)
    log_w = log_lik - torch.logsumexp(log_lik, dim=-1, keepdim=True)  # (B, P)
    constant = -0.5 * math.log(2 * math.pi * variance)
    log_after = torch.logsumexp(probe_log_lik + log_w[:, None, :], dim=-1) + constant  # (B, M)
    log_before = torch.logsumexp(probe_log_lik, dim=-1) - math.log(log_w.shape[-1]) + constant
    return (log_after - log_before).mean(dim=1)


def rollout(network: DesignNetwork, thetas: torch.Tensor, noise: torch.Tensor, config: DADConfig):
    """Run the policy for T steps on ``thetas (B, K, 2)`` with outcome noise ``(B, T)``; designs and outcomes."""
    batch = thetas.shape[0]
    pooled = torch.zeros(batch, config.encoding)
    designs, outcomes = [], []
    for t in range(config.horizon):
        design = network.emit(pooled, torch.full((batch,), t, dtype=torch.long))  # (B, 2)
        # reparameterised: dy/dξ flows into later designs
        outcome = paired_intensity_torch(design, thetas, config) + config.noise_std * noise[:, t]
        pooled = pooled + network.encode(design, outcome)
        designs.append(design)
        outcomes.append(outcome)
    return torch.stack(designs, 1), torch.stack(outcomes, 1)


def build(folder: Path, config: str = "default") -> None:
    """Train the design network of ``CONFIGS[config]``; write ``weights.pt`` and ``training.json``."""
    if config not in CONFIGS:
        raise ValueError(f"config must be one of {sorted(CONFIGS)}; got {config!r}")
    train_and_save(folder, train, CONFIGS[config])


def training_history(returns: list[float], log_every: int, started: float, last: int) -> dict[str, Any]:
    """What ``training.json`` records of a run: the mean return per block of ``log_every`` updates, the mean
    of the ``last`` updates and the seconds since ``started``."""
    averaged = [float(np.mean(returns[i:i + log_every])) for i in range(0, len(returns), log_every)]
    return {"mean_return_per_block": averaged, "block_steps": log_every,
            f"final_return_mean_last_{last}": float(np.mean(returns[-last:])),
            "seconds": time.perf_counter() - started}


def train_and_save(folder: Path, train_fn, settings) -> None:
    """``network, history = train_fn(settings)`` on one torch thread; write ``weights.pt`` and ``training.json``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the same weights on every machine with the same torch
    try:
        network, history = train_fn(settings)
    finally:
        torch.set_num_threads(threads)
    torch.save(network.state_dict(), Path(folder) / "weights.pt")
    (Path(folder) / "training.json").write_text(json.dumps({"config": asdict(settings), **history}, indent=1))


def train(config: DADConfig, log_every: int = 100) -> tuple[DesignNetwork, dict[str, Any]]:
    """Adam on −E[return] with pathwise gradients; returns the network and the return curve."""
    torch.manual_seed(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    network = DesignNetwork(config)
    optimiser = torch.optim.Adam(network.parameters(), lr=config.learning_rate)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, config.steps)
    returns, started = [], time.perf_counter()
    for _ in range(config.steps):
        draw = lambda *shape: torch.randn(*shape, generator=generator)
        thetas, noise = draw(config.batch_size, config.n_sources, 2), draw(config.batch_size, config.horizon)
        particles = draw(config.n_particles, config.n_sources, 2)
        probe_x = draw(config.batch_size, config.n_probes, 2).clamp(-DESIGN_BOUND, DESIGN_BOUND)
        probe_mean = intensity_torch(probe_x, thetas, config)  # (B, M, B): own θ on the diagonal
        probe_y = torch.diagonal(probe_mean, dim1=0, dim2=2).T + config.noise_std * draw(config.batch_size,
                                                                                          config.n_probes)
        designs, outcomes = rollout(network, thetas, noise, config)
        episode_return = total_icl_lp(particles, designs, outcomes, probe_x, probe_y, config,
                                      thetas if config.include_truth else None).mean()
        optimiser.zero_grad()
        (-episode_return).backward()
        # The intensity peaks sharply at the sources (m = 1e-4), so rare histories give huge gradients.
        nn.utils.clip_grad_norm_(network.parameters(), config.max_grad_norm)
        optimiser.step()
        schedule.step()
        returns.append(float(episode_return.detach()))
    return network, training_history(returns, log_every, started, last=100)


def cache_params(config: str) -> dict[str, Any]:
    """The cache key: empty for "default", so ``gauntlet data build curiosity-dad-policy`` builds the same entry."""
    return {} if config == "default" else {"config": config}


def load_design_network(config: str = "default") -> tuple[DesignNetwork, DADConfig]:
    """The trained network, trained into the data cache on first use (about 20 min for "default")."""
    if config not in CONFIGS:
        raise ValueError(f"config must be one of {sorted(CONFIGS)}; got {config!r}")
    folder = ensure_built(DATA_NAME, DATA_VERSION, build, params=cache_params(config))
    network = DesignNetwork(CONFIGS[config])
    network.load_state_dict(torch.load(folder / "weights.pt", weights_only=True))
    network.eval()
    return network, CONFIGS[config]


class CuriousDADAgent(Agent):
    """The trained design network acting in LocationFinding-v0 (deterministic: no noise in the policy).

    It reads the history from the observation (``designs``, ``outcomes``, ``steps``) and returns the
    action ξ / 4 in [−1, 1]².
    """

    name = "curiosity-dad"

    def __init__(self, config: str = "default"):
        self.config_name = config
        self.network, self.settings = load_design_network(config)

    def config(self) -> dict[str, Any]:
        return {"config": self.config_name}

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> np.ndarray:
        designs, outcomes, steps = observed_history(observation, np.float32)
        mask = np.arange(len(outcomes)) < steps
        with torch.no_grad():
            design = self.network(torch.as_tensor(designs)[None], torch.as_tensor(outcomes)[None],
                                  torch.as_tensor(mask, dtype=torch.float32)[None])[0]
        return np.clip(design.numpy() / DESIGN_BOUND, -1.0, 1.0).astype(np.float32)
