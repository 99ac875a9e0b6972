"""Registers the chem pricing server, its data builder and its task suites (string targets only)."""

from __future__ import annotations

SUITES = {"chem": ("clean", "clean_suite"), "chem-solvents": ("solvents", "solvents_suite"),
          "chem-noisy-low": ("noisy-low", "noisy_low_suite"),
          "chem-noisy-medium": ("noisy-medium", "noisy_medium_suite"),
          "chem-noisy-high": ("noisy-high", "noisy_high_suite")}


def register() -> None:
    from gauntlet.registry import registry

    module = "gauntlet.mcp_servers.chem_pricing"
    registry.add("server", "chem", f"{module}.server:build_server",
                 "chemical procurement pricing: ground chemicals, supplier quotes, pack selection, reactions")
    registry.add("data", "chem", f"{module}.build:build_catalogue",
                 "frozen chemical catalogue (2,450 real identities, 120 suppliers, ~279k quotes) in SQLite",
                 version="1")
    for name, (view, loader) in SUITES.items():
        registry.add("suite", name, f"{module}.suite:{loader}",
                     f"price 1,440 reactions ({view} view); gold trajectories from the oracle", server="chem")
    registry.add("demo", "chem", f"{module}.demo:run_demo",
                 "price a few reactions through the chem server over a real MCP client session")
