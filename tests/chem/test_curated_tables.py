"""The alias and salt-formula tables, read from ``data/chem``: the rows the catalogue and the noisy
views were built from before they moved out of the code, and the cache keys they feed."""

from __future__ import annotations

import json
import shutil

from gauntlet.mcp_servers.chem import build, reaction_data
from gauntlet.mcp_servers.chem.aliases import ALIASES, ALIASES_FILE, Alias, load_aliases
from gauntlet.mcp_servers.chem.views import SALT_FORMULA_NAMES, SALT_FORMULAS_FILE
from gauntlet.registry import registry

PPH3 = "c1ccc(P(c2ccccc2)c2ccccc2)cc1"


def _alias(name: str) -> Alias:
    return next(alias for alias in ALIASES if alias.name == name)


def test_alias_table_holds_the_111_identities_in_their_order():
    assert len(ALIASES) == 111 and len({alias.name for alias in ALIASES}) == 111
    assert ALIASES[0].name == "HATU" and ALIASES[65].name == "water" and ALIASES[-1].name == "methanesulfonyl chloride"


def test_the_reagents_the_tables_lack_or_name_badly_are_curated():
    assert _alias("aspirin") == Alias("aspirin", "CC(=O)Oc1ccccc1C(=O)O", ("ASA",), "fine", "50-78-2",
                                      synonyms=("acetylsalicylic acid", "2-acetoxybenzoic acid",
                                                "2-(acetyloxy)benzoic acid"))
    # written as PubChem writes it, so the curated row merges with the table's row
    assert _alias("lithium aluminium hydride").smiles == "[H-].[H-].[H-].[H-].[Li+].[Al+3]"
    assert _alias("lithium aluminium hydride").abbreviations == ("LiAlH4", "LAH")


def test_known_aliases_read_back_exactly():
    assert _alias("EDC hydrochloride") == Alias(
        "EDC hydrochloride", "CCN=C=NCCCN(C)C.Cl", ("EDC", "EDCI", "EDAC", "EDC.HCl", "EDC·HCl", "EDCI.HCl"),
        "coupling_reagent", "25952-53-8",
        synonyms=("1-ethyl-3-(3-dimethylaminopropyl)carbodiimide hydrochloride",
                  "N-(3-dimethylaminopropyl)-N'-ethylcarbodiimide hydrochloride"))
    assert _alias("palladium on carbon (10 wt% Pd)") == Alias(
        "palladium on carbon (10 wt% Pd)", "[Pd]", ("Pd/C", "10% Pd/C", "Pd-C"), "catalyst", "7440-05-3",
        molar_mass_g_mol=1064.2, note="sold by loading: 1064.2 g of material holds one mole of Pd")
    assert _alias("tetrakis(triphenylphosphine)palladium(0)").smiles == ".".join(["[Pd]"] + [PPH3] * 4)
    assert _alias("N,N-diisopropylethylamine").abbreviations == ("DIPEA", "DIEA", "Hünig's base", "Hunig's base",
                                                                 "iPr2NEt", "EtN(iPr)2")
    assert _alias("N,N-diisopropylethylamine").density_g_ml == 0.742
    assert _alias("water") == Alias("water", "O", ("H2O",), "solvent", "7732-18-5", density_g_ml=0.997)


def test_known_salt_formulas_read_back_exactly():
    assert len(SALT_FORMULA_NAMES) == 16
    assert SALT_FORMULA_NAMES["EDC hydrochloride"] == ("EDC·HCl", "EDCI.HCl", "EDC hydrochloride")
    assert SALT_FORMULA_NAMES["potassium carbonate"] == ("K2CO3", "K₂CO₃", "potassium carbonate")
    assert list(SALT_FORMULA_NAMES)[0] == "triethylamine" and list(SALT_FORMULA_NAMES)[-1] == "acetonitrile"


def test_the_alias_table_is_read_from_the_curated_file(tmp_path, monkeypatch):
    import gauntlet.curated as curated

    copy = tmp_path / "data"
    shutil.copytree(curated.DATA_ROOT, copy)
    monkeypatch.setattr(curated, "DATA_ROOT", copy)
    table = json.loads((copy / ALIASES_FILE).read_text(encoding="utf-8"))
    table["aliases"][-1]["density_g_ml"] = 1.0
    (copy / ALIASES_FILE).write_text(json.dumps(table), encoding="utf-8")
    assert load_aliases()[-1].density_g_ml == 1.0


def test_every_chem_entry_is_keyed_by_the_curated_tables_it_is_built_from(tmp_path, monkeypatch):
    import gauntlet.datacache as datacache
    from gauntlet.mcp_servers.chem.suite import suite_path

    asked = []

    def record(name, version, build, *, params=None, inputs=(), rebuild=False):
        asked.append((name, tuple(inputs)))
        return tmp_path

    monkeypatch.setattr(datacache, "ensure_built", record)
    suite_path("noisy-low", n_reactions=4)
    everything = (ALIASES_FILE, SALT_FORMULAS_FILE)
    assert build.CURATED_INPUTS == (ALIASES_FILE,) and reaction_data.CURATED_INPUTS == everything
    assert ("chem-catalogue", build.CURATED_INPUTS) in asked
    assert ("chem-reactions", everything) in asked and ("chem-suite", everything) in asked
    assert tuple(registry.get("data", "chem").metadata["inputs"]) == everything
