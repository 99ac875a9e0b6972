"""Quantity conversion: mass <-> amount of substance <-> volume, through molar mass and density."""

from __future__ import annotations

import math

MASS_G = {"mg": 1e-3, "g": 1.0, "kg": 1e3}
AMOUNT_MOL = {"umol": 1e-6, "µmol": 1e-6, "mmol": 1e-3, "mol": 1.0}
VOLUME_ML = {"uL": 1e-3, "µL": 1e-3, "mL": 1.0, "L": 1e3}
UNITS = (*MASS_G, *AMOUNT_MOL, *VOLUME_ML)
# Above this a value is a typing error, not a laboratory quantity (a tonne, a kilomole, a cubic metre).
MAX_BASE_QUANTITY = 1e6


class QuantityError(ValueError):
    """A unit that is not known, a value that is not a sensible quantity, or a missing conversion factor."""


def _dimension(unit: str) -> tuple[str, float]:
    for dimension, table in (("mass", MASS_G), ("amount", AMOUNT_MOL), ("volume", VOLUME_ML)):
        if unit in table:
            return dimension, table[unit]
    raise QuantityError(f"unknown unit {unit!r}; use one of {', '.join(UNITS)}")


def convert_quantity(value: float, from_unit: str, to_unit: str, molar_mass_g_mol: float | None = None,
                     density_g_ml: float | None = None) -> float:
    """``value`` in ``from_unit`` expressed in ``to_unit``.

    Mass <-> amount needs ``molar_mass_g_mol``; mass <-> volume needs ``density_g_ml``; amount <->
    volume needs both.
    """
    if not math.isfinite(value) or value < 0:
        raise QuantityError(f"a quantity must be a finite number >= 0, got {value}")
    source, source_scale = _dimension(from_unit)
    target, target_scale = _dimension(to_unit)
    base = value * source_scale
    if base > MAX_BASE_QUANTITY:
        raise QuantityError(f"{value} {from_unit} is beyond any laboratory quantity (limit 1e6 g, mol or mL)")
    for name, factor in (("molar_mass_g_mol", molar_mass_g_mol), ("density_g_ml", density_g_ml)):
        if factor is not None and not (math.isfinite(factor) and factor > 0):
            raise QuantityError(f"{name} must be a positive number, got {factor}")
    grams = {"mass": lambda: base, "amount": lambda: base * _need(molar_mass_g_mol, "molar_mass_g_mol", source),
             "volume": lambda: base * _need(density_g_ml, "density_g_ml", source)}
    if source == target:
        return base / target_scale
    mass_g = grams[source]()
    if target == "mass":
        return mass_g / target_scale
    if target == "amount":
        return mass_g / _need(molar_mass_g_mol, "molar_mass_g_mol", target) / target_scale
    return mass_g / _need(density_g_ml, "density_g_ml", target) / target_scale


def _need(factor: float | None, name: str, dimension: str) -> float:
    if factor is None:
        raise QuantityError(f"converting {dimension} needs {name}; look it up with get_chemical")
    return factor
