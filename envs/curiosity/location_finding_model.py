"""LocationFinding's model in one place: its constants and the source intensity μ(ξ, θ), in NumPy (the env
and its particle learners) and in torch (the agents that train against the model by gradient), side by side.

    y = μ(ξ, θ) + N(0, σ²),   μ(ξ, θ) = log(b + Σ_k 1 / (m + ‖ξ − θ_k‖²)),   θ_k ~ N(0, I₂)
    (Foster et al. 2021, DAD, location finding)

The env (``location_finding.py``), the design network (``agents/curiosity/dad.py``) and the belief-map
policy (``agents/curiosity/belief.py``) all read the model from here, so a change of the model reaches
all three. torch is imported only when a torch function runs: the env does not need it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

# Designs live in the square [−4, 4]² (the env's action is ξ / 4): it holds all but ~1e-4 of each source's
# prior mass per coordinate.
DESIGN_BOUND = 4.0


@dataclass(frozen=True)
class SourceIntensity:
    """μ(ξ, θ) = log(b + Σ_k 1 / (m + ‖ξ − θ_k‖²)) in NumPy, the env's mean function (b = ``background``,
    m = ``max_signal``: the intensity near a source is at most 1 / m)."""

    background: float
    max_signal: float

    def __call__(self, designs: np.ndarray, thetas: np.ndarray) -> np.ndarray:
        """``designs (..., 2)``, ``thetas (P, K, 2)`` -> ``(..., P)``."""
        # Coordinates written out: a reduction over an axis of length 2 costs more than the arithmetic.
        dx = designs[..., None, None, 0] - thetas[..., 0]
        dy = designs[..., None, None, 1] - thetas[..., 1]
        signal = 1.0 / (self.max_signal + dx * dx + dy * dy)  # (..., P, K)
        total = signal[..., 0] if signal.shape[-1] == 1 else signal.sum(axis=-1)
        return np.log(self.background + total)


@dataclass(frozen=True)
class LocationFindingModel:
    """The generative model of LocationFinding-v0; the defaults are the env's (``LOCATION_FINDING``).

    The agents' training configs extend it, so a config records the model its weights were trained on.
    """

    horizon: int = 30  # T: designs per episode
    n_sources: int = 2  # K
    noise_std: float = 0.5  # σ
    background: float = 0.1  # b
    max_signal: float = 1e-4  # m

    @property
    def intensity(self) -> SourceIntensity:
        """μ of this model in NumPy."""
        return SourceIntensity(self.background, self.max_signal)


LOCATION_FINDING = LocationFindingModel()


def intensity_torch(designs: torch.Tensor, thetas: torch.Tensor, model: LocationFindingModel) -> torch.Tensor:
    """μ(ξ, θ) in torch for every design and every θ, as ``SourceIntensity``:
    ``designs (..., 2)``, ``thetas (P, K, 2)`` -> ``(..., P)``."""
    import torch

    dx = designs[..., None, None, 0] - thetas[..., 0]
    dy = designs[..., None, None, 1] - thetas[..., 1]
    return torch.log(model.background + (1.0 / (model.max_signal + dx * dx + dy * dy)).sum(-1))


def paired_intensity_torch(designs: torch.Tensor, thetas: torch.Tensor, model: LocationFindingModel) -> torch.Tensor:
    """μ(ξ_b, θ_b) in torch, each history b's designs under its own θ_b:
    ``designs (B, ..., 2)``, ``thetas (B, K, 2)`` -> ``(B, ...)``."""
    import torch

    shape = (len(thetas),) + (1,) * (designs.dim() - 2) + thetas.shape[1:]
    # m + (dx² + dy²), where ``intensity_torch`` adds (m + dx²) + dy²: the two differ in the last bit, and
    # the shipped and cached weights were trained with exactly these sums.
    squared = ((designs[..., None, :] - thetas.reshape(shape)) ** 2).sum(-1)
    return torch.log(model.background + (1.0 / (model.max_signal + squared)).sum(-1))


def observed_history(observation: dict[str, Any], dtype: type[np.floating[Any]] = np.float64
                     ) -> tuple[np.ndarray, np.ndarray, int]:
    """``(designs (T, 2), outcomes (T,), steps taken)`` of a LocationFinding-v0 observation, as ``dtype``.

    The arrays are the observation's full buffers (rows past ``steps`` are padding). A policy that
    reads the history calls this, so a malformed observation fails with the same message everywhere.
    """
    designs = np.asarray(observation["designs"], dtype=dtype)
    outcomes = np.asarray(observation["outcomes"], dtype=dtype)
    if designs.ndim != 2 or designs.shape[1] != 2 or outcomes.shape != designs.shape[:1]:
        raise ValueError(f"the observation must hold designs (T, 2) and outcomes (T,) of LocationFinding-v0; "
                         f"got {designs.shape} and {outcomes.shape}")
    return designs, outcomes, int(observation["steps"])
