"""The frozen catalogue: real identities, documented quotes, deterministic, opened read-only."""

from __future__ import annotations

import json
import sqlite3

import pytest

from gauntlet.mcp_servers.chem.build import build_catalogue
from gauntlet.mcp_servers.chem.grounding import cas_check_digit_ok
from gauntlet.mcp_servers.chem.pricing import INVALID_GRADES, VALID_MIN_PURITY_PCT


def by_name(catalogue, name):
    (chemical_id,) = {cid for cid, _, kind in catalogue.name_index[name.casefold()] if kind in ("name", "abbreviation")}
    return catalogue.chemical(chemical_id)


@pytest.mark.parametrize("name, formula, molar_mass", [
    # Literature values (supplier certificates / PubChem): average molar masses.
    ("HATU", "C10H15F6N6OP", 380.23), ("XPhos", "C33H49P", 476.72), ("HOBt", "C6H5N3O", 135.12),
    ("Pd(dppf)Cl2", "C34H28Cl2FeP2Pd", 731.70), ("EDC", "C8H18ClN3", 191.70), ("DIPEA", "C8H19N", 129.25),
])
def test_curated_reagents_have_their_literature_formula_and_molar_mass(catalogue, name, formula, molar_mass):
    record = by_name(catalogue, name)
    assert record.formula == formula
    assert record.molar_mass_g_mol == pytest.approx(molar_mass, abs=0.03)


def test_edc_means_the_carbodiimide_not_dichloroethane(catalogue):
    assert by_name(catalogue, "EDC").name == "EDC hydrochloride"
    assert by_name(catalogue, "DCE").smiles == "ClCCCl"


def test_pd_on_carbon_is_priced_per_mole_of_palladium_at_ten_percent_loading(catalogue):
    record = by_name(catalogue, "Pd/C")
    assert record.molar_mass_g_mol == pytest.approx(106.42 / 0.10, rel=1e-3)


def test_liquids_carry_their_crc_density(catalogue):
    assert by_name(catalogue, "THF").density_g_ml == pytest.approx(0.889, abs=0.002)
    assert by_name(catalogue, "DCM").density_g_ml == pytest.approx(1.326, abs=0.005)
    assert by_name(catalogue, "HATU").density_g_ml is None


def test_every_cas_number_passes_its_check_digit(catalogue):
    rows = sqlite3.connect(catalogue.path).execute("SELECT cas FROM chemicals WHERE cas IS NOT NULL").fetchall()
    assert rows and all(cas_check_digit_ok(cas) for (cas,) in rows)


def test_identities_are_unique_by_inchikey(catalogue):
    rows = sqlite3.connect(catalogue.path).execute("SELECT inchikey FROM chemicals").fetchall()
    assert len(rows) == len({key for (key,) in rows}) == 600


def test_price_per_gram_falls_with_pack_size_for_one_supplier_and_grade(catalogue):
    quotes = catalogue.quotes(by_name(catalogue, "HATU").chemical_id)
    ladders = {}
    for quote in quotes:
        ladders.setdefault((quote.supplier_id, quote.grade, quote.purity_pct), []).append(quote)
    checked = 0
    for ladder in ladders.values():
        ladder.sort(key=lambda q: q.pack_mass_g)
        for small, large in zip(ladder, ladder[1:]):
            assert large.price_usd > small.price_usd
            assert large.price_usd / large.pack_mass_g < small.price_usd / small.pack_mass_g
            checked += 1
    assert checked > 10


def test_labelled_standard_and_low_purity_rows_are_listed_and_invalid(catalogue):
    rows = sqlite3.connect(catalogue.path).execute("SELECT DISTINCT grade FROM quotes").fetchall()
    assert INVALID_GRADES | {"technical", "reagent"} <= {grade for (grade,) in rows}
    for chemical_id in range(1, 60):
        for quote in catalogue.quotes(chemical_id):
            assert quote.is_valid == (quote.grade not in INVALID_GRADES and quote.purity_pct >= VALID_MIN_PURITY_PCT)


def test_the_server_side_connection_cannot_write(catalogue):
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        catalogue._connection.execute("DELETE FROM quotes")


def test_the_builder_is_deterministic_and_records_its_snapshot(tmp_path, catalogue):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    build_catalogue(first, n_chemicals=120, n_suppliers=30)
    build_catalogue(second, n_chemicals=120, n_suppliers=30)
    snapshot = json.loads((first / "snapshot.json").read_text())
    assert snapshot == json.loads((second / "snapshot.json").read_text())
    assert snapshot["snapshot_date"] and len(snapshot["content_sha256"]) == 64
    assert (first / "catalogue.sqlite").read_bytes() == (second / "catalogue.sqlite").read_bytes()
    assert snapshot["n_quotes"] > 100 * 120 * 0.8
    # With the same suppliers, a chemical's quotes do not depend on the other chemicals catalogued.
    small = sqlite3.connect(first / "catalogue.sqlite").execute(
        "SELECT price_usd FROM quotes WHERE chemical_id = 1 ORDER BY quote_id").fetchall()
    assert small == sqlite3.connect(catalogue.path).execute(
        "SELECT price_usd FROM quotes WHERE chemical_id = 1 ORDER BY quote_id").fetchall()
