"""Grounding abstains instead of guessing: a name that does not identify a catalogue compound is
"not found", its look-alikes are suggestions only, and every hit carries its match kind and confidence.

The small test catalogue holds the curated reagents and the first common chemicals, so most compounds
of the labelled names are not in it: the labelled set measures precision on it honestly."""

from __future__ import annotations

import shutil

import pytest

from gauntlet.bridges.mcp_client import result_value
from gauntlet.mcp_servers.chem.grounding import CONFIDENCE, HIT_THRESHOLD, Grounder, GroundingError
from gauntlet.mcp_servers.chem.labelled_names import catalogue_ids, evaluate, load_labels, summarise

needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="OPSIN needs Java")


def name_of(grounder, query):
    return grounder.ground(query).hits[0].name


@pytest.mark.parametrize(("query", "look_alike"), [
    ("4-fluoronitrobenzene", "4-chloronitrobenzene"),  # a halogen apart: another compound
    ("3-chloronitrobenzene", "4-chloronitrobenzene"),  # a locant apart
    ("1-hexanol", "hexanal"),
])
def test_a_name_of_a_compound_not_sold_is_not_found_and_its_look_alike_is_only_a_suggestion(grounder, query,
                                                                                            look_alike):
    assert grounder.ground(look_alike).found, "the look-alike must be in the test catalogue"
    result = grounder.ground(query)
    assert not result.found and result.hits == []
    assert look_alike in [s.name for s in result.suggestions]
    assert all(s.confidence < HIT_THRESHOLD for s in result.suggestions)
    assert "is not in the catalogue" in result.explanation()
    with pytest.raises(GroundingError, match="not in the catalogue"):
        grounder.search(query)


def test_a_known_compound_the_catalogue_does_not_sell_is_named_in_the_answer(grounder):
    result = grounder.ground("4-bromoanisole")  # in the PubChem tables, not in the small catalogue
    assert not result.found
    assert result.known is not None and result.known.cas == "104-92-7" and result.known.formula == "C7H7BrO"
    assert "does not sell" in result.explanation()


def test_the_reagents_chemists_write_are_found_by_the_names_they_write(grounder):
    assert name_of(grounder, "LiAlH4") == name_of(grounder, "lithium aluminum hydride") == "lithium aluminium hydride"
    assert name_of(grounder, "aspirin") == name_of(grounder, "acetylsalicylic acid") == "aspirin"
    assert name_of(grounder, "Et3N") == "triethylamine"


def test_every_hit_states_its_match_kind_and_a_confidence_at_or_above_the_threshold(grounder):
    readings = {"64-17-5": "identifier", "CCO": "identifier", "HATU": "name", "triethyl amine": "normalised",
                "4-chloronitrobenzne": "fuzzy", "Ac0H": "fuzzy"}
    for query, kind in readings.items():
        result = grounder.ground(query)
        assert result.found and len(result.hits) == 1, query
        assert result.hits[0].match_kind == kind and result.hits[0].confidence == CONFIDENCE[kind] >= HIT_THRESHOLD
        assert result.suggestions == []


def test_a_slip_that_changes_a_digit_or_spells_a_known_compound_is_not_corrected(grounder):
    assert name_of(grounder, "4-chloronitrobenzne") == "4-chloronitrobenzene"  # a slip: corrected
    assert not grounder.ground("3-chloronitrobenzene").found  # a locant: another compound
    assert not grounder.ground("4-fluoronitrobenzene").found  # a known compound's name


def tiny_catalogue(path, chemicals):
    """A catalogue database of ``chemicals`` [(name, smiles, [(spelling, kind)])], no quotes."""
    import json
    import sqlite3

    from gauntlet.mcp_servers.chem.build import INDEXES, SCHEMA
    from gauntlet.mcp_servers.chem.chemistry import connectivity_key, identity_of
    from gauntlet.mcp_servers.chem.names import compact_key, name_key
    from gauntlet.mcp_servers.chem.store import CatalogueStore

    connection = sqlite3.connect(path)
    connection.executescript(SCHEMA)
    for chemical_id, (name, smiles, spellings) in enumerate(chemicals, start=1):
        facts = identity_of(smiles)
        connection.execute("INSERT INTO chemicals VALUES (?, ?, ?, ?, ?, ?, ?, NULL, 'solid', NULL, 'fine', "
                           "'test', NULL, NULL, '')", (chemical_id, name, facts.smiles, facts.inchikey,
                                                       connectivity_key(facts.inchikey), facts.formula,
                                                       facts.molar_mass_g_mol))
        connection.executemany("INSERT INTO names VALUES (?, ?, ?, ?, ?, ?)",
                               [(chemical_id, text, name_key(text), kind, compact_key(text), name_key(text)[::-1])
                                for text, kind in [(name, "name"), *spellings]])
    connection.executescript(INDEXES)
    connection.execute("INSERT INTO meta VALUES ('n_chemicals', ?)", (json.dumps(len(chemicals)),))
    connection.commit()
    connection.close()
    return CatalogueStore(path)


def test_a_name_shared_by_several_compounds_identifies_none_of_them(tmp_path):
    store = tiny_catalogue(tmp_path / "tiny.sqlite", [
        ("L-alanine", "C[C@H](N)C(=O)O", [("alanine", "synonym")]),
        ("DL-alanine", "CC(N)C(=O)O", [("alanine", "synonym")]),
        ("glycine", "NCC(=O)O", [("aminoacetic acid", "synonym")])])
    grounder = Grounder(store, use_opsin=False)
    result = grounder.ground("alanine")
    assert not result.found
    assert sorted((s.name, s.kind) for s in result.suggestions) == [("DL-alanine", "ambiguous"),
                                                                   ("L-alanine", "ambiguous")]
    assert "several catalogue compounds" in result.explanation()
    # a preferred name outranks a synonym: no tie
    assert grounder.ground("L-alanine").hits[0].name == "L-alanine"
    assert grounder.ground("aminoacetic acid").hits[0].match_kind == "synonym"


def test_a_racemic_descriptor_keeps_the_identity_and_a_specific_one_does_not(tmp_path):
    store = tiny_catalogue(tmp_path / "tiny.sqlite", [("2-butanol", "CCC(C)O", []),
                                                      ("L-proline", "O=C(O)[C@@H]1CCCN1", [])])
    grounder = Grounder(store, use_opsin=False)
    for racemic in ("(±)-2-butanol", "rac-2-butanol", "DL-2-butanol"):
        assert grounder.ground(racemic).hits[0].match_kind == "normalised"
    specific = grounder.ground("(R)-2-butanol")
    assert not specific.found and [(s.name, s.kind) for s in specific.suggestions] == [("2-butanol", "stereo form")]
    bare = grounder.ground("proline")  # the catalogue sells one stereoisomer: the bare name does not say which
    assert not bare.found and [(s.name, s.kind) for s in bare.suggestions] == [("L-proline", "stereo form")]


def test_a_structure_whose_stereochemistry_differs_is_a_suggestion_not_a_hit(grounder, catalogue):
    from gauntlet.mcp_servers.chem.chemistry import identity_of

    def mirror_image(smiles):
        return smiles.replace("@@", "!").replace("@", "@@").replace("!", "@")

    chiral = next(record for chemical_id in range(1, 601) for record in [catalogue.chemical(chemical_id)]
                  if "@" in record.smiles and "." not in record.smiles
                  and identity_of(mirror_image(record.smiles)).inchikey != record.inchikey)
    mirror = mirror_image(chiral.smiles)
    result = grounder.ground(mirror)
    assert not result.found or result.hits[0].chemical_id != chiral.chemical_id
    if not result.found:
        assert chiral.chemical_id in [s.chemical_id for s in result.suggestions]


def test_no_labelled_name_gets_a_wrong_hit_and_names_in_the_catalogue_are_found(grounder):
    labels = load_labels()
    summary = summarise(evaluate(grounder, labels))
    assert summary["wrong_hits"] == []
    assert summary["n_not_in_catalogue"] >= 300  # the small catalogue lacks most labelled compounds
    assert summary["recall_in_catalogue"] >= 0.95


@needs_java
def test_opsin_reads_a_systematic_name_of_a_compound_not_sold_and_says_what_it_is(catalogue):
    grounder = Grounder(catalogue, use_opsin=True)
    result = grounder.ground("2-bromo-4-fluoro-5-nitrobenzonitrile")
    assert not result.found and result.parsed_smiles == "N#Cc1cc([N+](=O)[O-])c(F)cc1Br"
    assert "no catalogue compound has" in result.explanation()
    dipea = grounder.ground("N-ethyl-N-propan-2-ylpropan-2-amine")
    assert dipea.hits[0].name == "N,N-diisopropylethylamine" and dipea.hits[0].match_kind == "parsed name"


@needs_java
def test_with_opsin_no_labelled_name_gets_a_wrong_hit(catalogue):
    summary = summarise(evaluate(Grounder(catalogue, use_opsin=True), load_labels()))
    assert summary["wrong_hits"] == []


# The labelled set -----------------------------------------------------------------------------------------
def test_the_labelled_set_has_300_names_100_not_sold_and_every_kind_the_issue_names():
    labels = load_labels()
    assert len(labels) >= 300 and sum(not label.in_catalogue for label in labels) >= 100
    groups = {label.group for label in labels}
    assert {"common reagent", "typo", "salt", "table name", "look-alike, not sold", "known, not sold",
            "not sold, hand-checked"} <= groups
    assert all(label.inchikey or label.cas for label in labels)
    by_name = {label.name: label for label in labels}
    for name in ("LiAlH4", "aspirin", "4-bromoanisole", "4-fluoronitrobenzene"):
        assert by_name[name].in_catalogue and by_name[name].origin == "hand-checked"


def test_the_truth_of_a_label_is_matched_by_inchikey_or_cas(catalogue):
    labels = {label.name: label for label in load_labels()}
    assert catalogue_ids(catalogue, labels["LiAlH4"]) == catalogue_ids(catalogue, labels["LAH"]) != set()
    assert catalogue_ids(catalogue, labels["sofosbuvir"]) == set()


# Through the server ---------------------------------------------------------------------------------------
def test_search_chemical_answers_not_found_as_a_result_with_suggestions_not_an_error(client):
    result = client.call_tool("search_chemical", {"query": "4-fluoronitrobenzene"})
    assert not result.isError
    value = result_value(result)
    assert value["found"] is False and value["candidates"] == []
    assert "4-chloronitrobenzene" in [s["name"] for s in value["suggestions"]]
    assert value["known_compound"]["cas"] == "350-46-9" and "not in the catalogue" in value["message"]
    found = result_value(client.call_tool("search_chemical", {"query": "4-chloronitrobenzene"}))
    assert found["found"] is True and found["candidates"][0]["match_kind"] == "name" and found["suggestions"] == []


def test_the_search_result_schema_tells_a_client_about_found_and_suggestions(client):
    schema = {tool.name: tool.outputSchema for tool in client.list_tools()}["search_chemical"]
    assert {"found", "candidates", "suggestions", "known_compound", "message"} <= set(schema["properties"])
    assert "never the answer" in schema["properties"]["found"]["description"]


# The warm OPSIN process -----------------------------------------------------------------------------------
@needs_java
def test_one_opsin_process_answers_name_after_name_and_comes_back_after_a_timeout(monkeypatch):
    from gauntlet.mcp_servers.chem import opsin

    parser = opsin.OpsinParser()
    try:
        assert parser.parse("4-bromoanisole") == "BrC1=CC=C(C=C1)OC"
        assert parser.parse("aspirin") is None  # a trivial name OPSIN does not know: no parse, no error
        process = parser._process
        assert parser.parse("ethanol") == "C(C)O" and parser._process is process  # the same warm process
        monkeypatch.setattr(opsin, "PARSE_TIMEOUT_S", 0.0)
        assert parser.parse("propan-2-ol") is None and parser._process is None  # too slow: the process is replaced
        monkeypatch.undo()
        assert parser.parse("propan-2-ol") == "CC(C)O"
    finally:
        parser.close()
