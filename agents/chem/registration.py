"""Registers the chemical pricing agents (string targets only: nothing heavy is imported here)."""

from __future__ import annotations


def register() -> None:
    from gauntlet.registry import registry

    registry.add("agent", "chem-oracle", "gauntlet.agents.chem.agents:OracleAgent",
                 "prices a reaction through the chem tools by the gold rule (CTA@25 = 100% on clean views)")
    registry.add("agent", "chem-naive", "gauntlet.agents.chem.agents:NaiveAgent",
                 "prices a reaction at the cheapest $/g of any quote, ignoring packs and grades (a baseline)")
