"""Multi-step routes: chains of template steps in which the product of step k is a reactant of step k+1.

A route starts like a single-step reaction (a class's template on catalogue building blocks). Its
product becomes the *intermediate* of the next step: the generator looks for a class whose reactant
pattern the intermediate fits (one site, no competing group, up to ``MAX_INTERMEDIATE_HEAVY_ATOMS``),
draws the partner (if the class takes two reactants) from that class's pool, runs the template and
keeps the step when its product is new to the route (so Boc protection is never undone by the very
next step). Each route aims at a length drawn from 2 to ``MAX_ROUTE_STEPS`` (``TARGET_LENGTH_WEIGHTS``);
while steps remain it prefers a step whose product still fits some class (one step of look-ahead), a
route short of its target is usually drawn again (``KEEP_SHORT_PROBABILITY``), two-step routes and
any one class sequence are capped, and a protection never ends a route (``NOT_LAST_CLASSES``).
Typical chains: bromobenzoic acid -> amide -> Suzuki biaryl; bromobenzaldehyde ->
reductive amination -> Boc protection -> Suzuki -> Boc deprotection.

In every later step the intermediate is the limiting reagent (1.0 equiv, role ``intermediate``) and
is *made, not bought*: it has no catalogue id, and the route's gold rule (``gold.price_route``) runs
each step on all of the intermediate the step before gave. Conditions, yields and procedure texts
come from the same protocols as single steps. Generation is seeded and deterministic.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from gauntlet.mcp_servers.chem.reactions import (
    INTERMEDIATE_ROLE,
    YIELD_RANGE_PCT,
    ClassKit,
    Component,
    Reaction,
    StepFactory,
    procedure_text,
)
from gauntlet.mcp_servers.chem.store import CatalogueStore

MAX_INTERMEDIATE_HEAVY_ATOMS = 40
MAX_ROUTE_STEPS = 5
# A route aims at a length drawn with these weights (2, 3, 4, 5 steps) and, while it has steps to go,
# prefers steps whose product keeps a reactive handle; it ends early when no class takes its product.
TARGET_LENGTH_WEIGHTS = (0.2, 0.3, 0.3, 0.2)
# Two-step chains come easily (most products have no handle left): at most this share of the routes.
MAX_TWO_STEP_SHARE = 0.4
# A route that ends short of its target length is kept with this chance (else drawn again), for the
# first half of the attempts; so longer routes are common where the chemistry allows them.
KEEP_SHORT_PROBABILITY = 0.1
# A protection is done to run a later step: it does not end a route.
NOT_LAST_CLASSES = ("Boc protection",)
# At most this many routes share one sequence of reaction classes.
MAX_ROUTES_PER_SEQUENCE = 8
MAX_ROUTE_ATTEMPTS = 60_000
PARTNER_DRAWS = 6


@dataclass
class Route:
    route_id: str
    steps: list[Reaction]

    @property
    def product_smiles(self) -> str:
        return self.steps[-1].product_smiles

    @property
    def product_molar_mass_g_mol(self) -> float:
        return self.steps[-1].product_molar_mass_g_mol

    def to_json(self) -> dict:
        return {"route_id": self.route_id, "steps": [step.to_json() for step in self.steps]}

    @classmethod
    def from_json(cls, data: dict) -> Route:
        return cls(data["route_id"], [Reaction.from_json(step) for step in data["steps"]])


def intermediate_name(step_number: int) -> str:
    """How a later step names the intermediate made by step ``step_number``."""
    return f"product of step {step_number}"


def _first_step(factory: StepFactory, kit: ClassKit, rng: random.Random, route_id: str) -> Reaction | None:
    reactant_ids = [rng.choice(pool) for pool in kit.pools]
    if len(set(reactant_ids)) != len(reactant_ids):
        return None
    facts = factory.run(kit, tuple(factory.molecules[cid] for cid in reactant_ids))
    names = factory.spellings(reactant_ids)
    if facts is None or names is None:
        return None
    components = [Component(names[0], "limiting reagent", reactant_ids[0], equiv=1.0)]
    if len(reactant_ids) > 1:
        components.append(Component(names[1], "coupling partner", reactant_ids[1],
                                    equiv=rng.choice(kit.reaction_class.partner_equiv)))
    return _step(factory, kit, rng, f"{route_id}.1", components, facts)


def _step(factory: StepFactory, kit: ClassKit, rng: random.Random, step_id: str, reactants: list[Component],
          facts) -> Reaction:
    components = reactants + factory.conditions(kit, rng)
    yield_pct = float(rng.randint(*YIELD_RANGE_PCT))
    return Reaction(reaction_id=step_id, reaction_class=kit.reaction_class.name, components=components,
                    product_smiles=facts.smiles, product_molar_mass_g_mol=facts.molar_mass_g_mol,
                    yield_pct=yield_pct, procedure=procedure_text(kit.reaction_class, components, yield_pct))


def _fits_some_class(factory: StepFactory, mol) -> bool:
    """Whether some class could take ``mol`` as a reactant: the route can go on after it."""
    return any(factory.fits(mol, pattern, MAX_INTERMEDIATE_HEAVY_ATOMS, excluded=kit.excluded[slot])
               for kit in factory.classes if all(kit.pools) for slot, pattern in enumerate(kit.patterns))


def _next_step(factory: StepFactory, previous: Reaction, step_number: int, rng: random.Random, route_id: str,
               seen_smiles: set[str], go_on: bool = False) -> Reaction | None:
    """A step that consumes ``previous``'s product, or None when no class takes it. With ``go_on`` it
    prefers a step whose product still carries a handle some class accepts (the route can go on);
    without it (the route's last step) it never chooses a class of ``NOT_LAST_CLASSES``."""
    from rdkit import Chem

    intermediate = Chem.MolFromSmiles(previous.product_smiles)
    options = [(kit, slot) for kit in factory.classes if all(kit.pools)
               and (go_on or kit.reaction_class.name not in NOT_LAST_CLASSES)
               for slot, pattern in enumerate(kit.patterns)
               if factory.fits(intermediate, pattern, MAX_INTERMEDIATE_HEAVY_ATOMS, excluded=kit.excluded[slot])]
    rng.shuffle(options)
    fallback = None
    for kit, slot in options:
        partner_slots = [i for i in range(len(kit.patterns)) if i != slot]
        for _ in range(PARTNER_DRAWS if partner_slots else 1):
            partners = {i: rng.choice(kit.pools[i]) for i in partner_slots}
            reactants = tuple(intermediate if i == slot else factory.molecules[partners[i]]
                              for i in range(len(kit.patterns)))
            facts = factory.run(kit, reactants)
            if facts is None or facts.smiles in seen_smiles:
                continue
            spelled = factory.spellings(partners.values())
            if spelled is None:
                continue
            names = dict(zip(partners, spelled))
            components = [Component(intermediate_name(step_number - 1), INTERMEDIATE_ROLE, None, equiv=1.0)]
            components += [Component(names[i], "coupling partner", partners[i],
                                     equiv=rng.choice(kit.reaction_class.partner_equiv)) for i in partner_slots]
            step = _step(factory, kit, rng, f"{route_id}.{step_number}", components, facts)
            if not go_on or _fits_some_class(factory, Chem.MolFromSmiles(facts.smiles)):
                return step
            fallback = fallback or step
            break  # this class gives a dead end with this partner; look at the next class
    return fallback


def generate_routes(catalogue: CatalogueStore, n_routes: int, seed: int,
                    factory: StepFactory | None = None) -> list[Route]:
    """Up to ``n_routes`` routes of 2 to ``MAX_ROUTE_STEPS`` steps (see the module docstring); fewer only
    when ``MAX_ROUTE_ATTEMPTS`` first steps found no more new chains."""
    factory = factory or StepFactory(catalogue)
    rng = random.Random(f"{seed}|routes")
    starters = [kit for kit in factory.classes if all(kit.pools)]
    routes: list[Route] = []
    seen_chains: set[tuple[str, ...]] = set()
    two_step = 0
    sequences: Counter[tuple[str, ...]] = Counter()
    for attempt in range(MAX_ROUTE_ATTEMPTS):
        if len(routes) >= n_routes:
            break
        route_id = f"ROUTE-{len(routes) + 1:04d}"
        first = _first_step(factory, rng.choice(starters), rng, route_id)
        if first is None:
            continue
        target = rng.choices(range(2, MAX_ROUTE_STEPS + 1), weights=TARGET_LENGTH_WEIGHTS)[0]
        steps = [first]
        seen_smiles = {first.product_smiles} | {
            factory.catalogue.chemical(c.chemical_id).smiles for c in first.components
            if c.role != "solvent" and c.chemical_id is not None}  # a first step has no intermediate
        while len(steps) < target:
            step = _next_step(factory, steps[-1], len(steps) + 1, rng, route_id, seen_smiles,
                              go_on=len(steps) + 1 < target)
            if step is None:
                break
            steps.append(step)
            seen_smiles.add(step.product_smiles)
        chain = tuple(step.product_smiles for step in steps)
        if len(steps) < 2 or chain in seen_chains:
            continue
        early = attempt < MAX_ROUTE_ATTEMPTS // 2
        if early and len(steps) < target and rng.random() >= KEEP_SHORT_PROBABILITY:
            continue
        if early and len(steps) == 2 and two_step >= MAX_TWO_STEP_SHARE * n_routes:
            continue  # enough two-step routes: keep drawing for longer ones (for a while)
        sequence = tuple(step.reaction_class for step in steps)
        if early and sequences[sequence] >= MAX_ROUTES_PER_SEQUENCE:
            continue
        sequences[sequence] += 1
        two_step += len(steps) == 2
        seen_chains.add(chain)
        routes.append(Route(route_id, steps))
    return routes
