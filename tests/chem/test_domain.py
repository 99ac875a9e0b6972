"""Domain modules tested directly, against values computed independently of them."""

from __future__ import annotations

import math
import sqlite3

import pytest

from gauntlet.mcp_servers.chem.calculator import CalculationError, calculate
from gauntlet.mcp_servers.chem.chemistry import ChemistryInputError, identity_of
from gauntlet.mcp_servers.chem.grounding import GroundingError, cas_check_digit_ok
from gauntlet.mcp_servers.chem.pricing import Quote
from gauntlet.mcp_servers.chem.procurement import ProcurementError, select_pack
from gauntlet.mcp_servers.chem.quantities import QuantityError, convert_quantity


# Quantities ----------------------------------------------------------------------------------
def test_one_mmol_of_ethanol_weighs_its_molar_mass_in_milligrams():
    assert convert_quantity(1.0, "mmol", "mg", molar_mass_g_mol=46.069) == pytest.approx(46.069)


def test_volume_mass_and_amount_convert_through_density_and_molar_mass():
    # 10 mL of THF (0.889 g/mL, 72.107 g/mol) = 8.89 g = 123.29 mmol, by hand.
    assert convert_quantity(10, "mL", "g", density_g_ml=0.889) == pytest.approx(8.89)
    assert convert_quantity(10, "mL", "mmol", 72.107, 0.889) == pytest.approx(8.89 / 72.107 * 1000)
    assert convert_quantity(250, "uL", "mL") == pytest.approx(0.25)
    assert convert_quantity(2.5, "kg", "g") == pytest.approx(2500)


@pytest.mark.parametrize("value, source, target, kwargs, message", [
    (-1.0, "g", "mg", {}, ">= 0"), (math.nan, "g", "mg", {}, "finite"), (1.0, "ton", "g", {}, "unknown unit"),
    (1.0, "g", "mmol", {}, "needs molar_mass"), (1.0, "mL", "g", {}, "needs density"),
    (5e9, "g", "mg", {}, "beyond any laboratory"), (1.0, "g", "mol", {"molar_mass_g_mol": -3.0}, "positive"),
])
def test_bad_quantities_are_refused_with_a_reason(value, source, target, kwargs, message):
    with pytest.raises(QuantityError, match=message):
        convert_quantity(value, source, target, **kwargs)


# Calculator ----------------------------------------------------------------------------------
@pytest.mark.parametrize("expression, expected", [
    ("(12.5 + 3.25) / 0.85", 18.529411764705884), ("2 ^ 10", 1024.0), ("-3 * -4 + 7 % 4", 15.0),
    ("max(1, 5.5, 3) + min(2, -1)", 4.5), ("sqrt(16) + ceil(1.2) + floor(-1.2)", 4.0), ("round(2.675, 2)", 2.67),
    ("1e3 / 8", 125.0), ("log(exp(2))", 2.0),
])
def test_arithmetic_gives_the_exact_value(expression, expected):
    assert calculate(expression) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("expression, message", [
    ("__import__('os').system('true')", "only numbers"), ("x + 1", "only numbers"), ("(1).real", "only numbers"),
    ("[1, 2]", "only numbers"), ("1 / 0", "no finite value"), ("10 ** 1000", "exponents are limited"),
    ("1 +", "not an arithmetic expression"), ("1" * 600, "longer than"), ("exp(1000)", "no finite value"),
    ("True + 1", "only numbers"),
])
def test_anything_but_arithmetic_is_refused(expression, message):
    with pytest.raises(CalculationError, match=message):
        calculate(expression)


# Structures ----------------------------------------------------------------------------------
def test_molar_mass_is_the_average_not_the_monoisotopic_mass():
    facts = identity_of("Brc1ccccc1")  # bromobenzene: 157.01 g/mol average, 155.957 Da monoisotopic
    assert facts.formula == "C6H5Br"
    assert facts.molar_mass_g_mol == pytest.approx(157.01, abs=0.01)
    assert facts.monoisotopic_mass_da == pytest.approx(155.9575, abs=0.001)


def test_equivalent_smiles_give_one_canonical_identity():
    assert identity_of("OCC").smiles == identity_of("C(O)C").smiles == "CCO"
    assert identity_of("OCC").inchikey == "LFQSCWFLJHTTHZ-UHFFFAOYSA-N"


@pytest.mark.parametrize("smiles", ["C1CC", "c1ccccc", "C(C", "Xx", "", "C" * 2001])
def test_malformed_smiles_is_refused(smiles):
    with pytest.raises(ChemistryInputError):
        identity_of(smiles)


# Pack selection ------------------------------------------------------------------------------
def quote(quote_id, mass_g, price, grade="reagent", purity=98.0):
    return Quote(quote_id, 1, 1, f"X-{quote_id}", mass_g, "g", mass_g, None, price, purity, grade, 2)


def test_the_cheapest_valid_pack_that_covers_the_need_is_chosen():
    quotes = [quote(1, 1, 10.0), quote(2, 5, 25.0), quote(3, 5, 20.0), quote(4, 25, 60.0),
              quote(5, 5, 1.0, grade="technical", purity=90.0), quote(6, 10, 2.0, grade="isotope-labelled"),
              quote(7, 10, 3.0, grade="reference standard", purity=99.9)]
    choice = select_pack(quotes, 2.0)
    assert (choice.quote.quote_id, choice.n_packs, choice.total_usd) == (3, 1, 20.0)
    assert select_pack(quotes, 1.0).quote.quote_id == 1  # a pack exactly the need covers it


def test_whole_multiples_of_the_largest_pack_when_none_covers():
    quotes = [quote(1, 1, 10.0), quote(2, 25, 60.0), quote(3, 25, 55.0)]
    choice = select_pack(quotes, 60.0)
    assert (choice.quote.quote_id, choice.n_packs, choice.total_usd, choice.covers_g) == (3, 3, 165.0, 75.0)


def test_ties_go_to_the_lower_quote_id():
    assert select_pack([quote(9, 5, 20.0), quote(4, 5, 20.0)], 1.0).quote.quote_id == 4


def test_no_valid_pack_or_no_need_is_an_error():
    with pytest.raises(ProcurementError, match="no valid pack"):
        select_pack([quote(1, 5, 1.0, grade="technical", purity=90.0)], 1.0)
    with pytest.raises(ProcurementError, match="positive"):
        select_pack([quote(1, 5, 1.0)], 0.0)


# Grounding -----------------------------------------------------------------------------------
def test_cas_check_digit():
    assert cas_check_digit_ok("64-17-5") and cas_check_digit_ok("7732-18-5")
    assert not cas_check_digit_ok("64-17-6")


@pytest.mark.parametrize("query, expected_name, matched_on", [
    ("HATU", "HATU", "name"), ("thf", "tetrahydrofuran", "abbreviation"), ("EDCI", "EDC hydrochloride", "abbreviation"),
    ("Pd(dppf)Cl₂", "[1,1'-bis(diphenylphosphino)ferrocene]dichloropalladium(II)", "abbreviation"),
    ("64-17-5", "ethanol", "cas"), ("OCC", "ethanol", "smiles"), ("LFQSCWFLJHTTHZ-UHFFFAOYSA-N", "ethanol", "inchikey"),
    ("  Tetrahydrofuran ", "tetrahydrofuran", "name"),
])
def test_search_finds_the_chemical_with_full_confidence(grounder, query, expected_name, matched_on):
    best = grounder.search(query)[0]
    assert (best.name, best.matched_on, best.confidence) == (expected_name, matched_on, 1.0)


def test_a_stereo_form_the_catalogue_does_not_sell_is_not_found_but_named(grounder):
    result = grounder.ground("(S)-alanine")
    assert not result.found and result.known is not None and result.known.cas == "56-41-7"  # L-alanine


def test_a_one_letter_slip_in_a_long_name_is_corrected_at_lower_confidence(grounder):
    best = grounder.search("tetrahydrofurane")[0]
    assert best.name == "tetrahydrofuran" and best.match_kind == "fuzzy" and best.confidence < 1.0


def test_unknown_names_fail_saying_they_are_not_in_the_catalogue(grounder):
    with pytest.raises(GroundingError, match=r"'xyzzyq' is not in the catalogue"):
        grounder.search("xyzzyq")


@pytest.mark.parametrize("query, message", [("64-17-6", "check digit"), ("", "empty query"),
                                            ("a" * 301, "longer than")])
def test_bad_queries_fail_with_a_reason(grounder, query, message):
    with pytest.raises(GroundingError, match=message):
        grounder.search(query)


def test_sql_in_a_name_is_just_a_name(grounder, catalogue):
    with pytest.raises(GroundingError):
        grounder.search("x'; DROP TABLE chemicals; --")
    assert sqlite3.connect(catalogue.path).execute("SELECT COUNT(*) FROM chemicals").fetchone()[0] == 600
