"""The pricing server through real MCP client sessions: schemas, results against the domain, errors."""

from __future__ import annotations

import json

import pytest

from gauntlet.bridges.mcp_client import BlockingMCPClient, ServerTarget, result_value
from gauntlet.bridges.server_process import serve_command, spawn_http_server
from gauntlet.mcp_servers.chem import procurement
from gauntlet.mcp_servers.chem.chemistry import identity_of

TOOLS = {"search_chemical", "get_chemical", "get_supplier_quotes", "select_pack", "convert_quantity",
         "compute_molar_mass", "canonicalize_smiles", "similar_chemicals", "calculate", "list_reactions",
         "get_reaction", "list_routes", "get_route"}


def call(client, name, **arguments):
    result = client.call_tool(name, arguments)
    return bool(result.isError), result_value(result)


def test_every_tool_is_listed_read_only_with_input_and_output_schemas(client):
    tools = {tool.name: tool for tool in client.list_tools()}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.outputSchema and tool.inputSchema and tool.description
        assert tool.annotations.readOnlyHint and tool.annotations.idempotentHint
        assert tool.annotations.destructiveHint is False


def test_the_served_tools_are_the_recipe_declarations_in_order(client):
    from gauntlet.mcp_servers.chem.server import TOOLS as DECLARED

    listed = client.list_tools()
    assert [tool.name for tool in listed] == DECLARED.names()
    for tool in listed:
        declared = DECLARED[tool.name]
        assert (tool.description, tool.annotations) == (declared.description, declared.annotations)
        assert "chem" not in tool.inputSchema.get("properties", {}) and "source" not in tool.inputSchema["properties"]


def test_search_returns_ranked_candidates_with_identity(client):
    is_error, result = call(client, "search_chemical", query="DIPEA")
    assert not is_error
    best = result["candidates"][0]
    assert best["smiles"] == identity_of("CCN(C(C)C)C(C)C").smiles and best["confidence"] == 1.0


def test_select_pack_matches_the_domain_rule_on_the_same_quotes(client, catalogue):
    _, found = call(client, "search_chemical", query="HATU")
    chemical_id = found["candidates"][0]["chemical_id"]
    is_error, pack = call(client, "select_pack", chemical_id=chemical_id, required_amount=1.2, unit="mmol")
    assert not is_error
    need_g = 1.2 * catalogue.chemical(chemical_id).molar_mass_g_mol / 1000
    expected = procurement.select_pack(catalogue.quotes(chemical_id), need_g)
    assert pack["required_g"] == pytest.approx(need_g)
    assert (pack["quote_id"], pack["total_usd"]) == (expected.quote.quote_id, expected.total_usd)
    assert pack["pack_mass_g"] >= need_g and pack["n_packs"] == 1


def test_quotes_come_cheapest_first_and_valid_only_drops_the_invalid_rows(client, catalogue):
    _, found = call(client, "search_chemical", query="THF")
    chemical_id = found["candidates"][0]["chemical_id"]
    _, every = call(client, "get_supplier_quotes", chemical_id=chemical_id, limit=200)
    _, valid = call(client, "get_supplier_quotes", chemical_id=chemical_id, valid_only=True, limit=200)
    prices = [quote["price_usd"] for quote in every["quotes"]]
    assert prices == sorted(prices) and every["n_quotes"] == len(catalogue.quotes(chemical_id))
    assert all(quote["valid"] for quote in valid["quotes"]) and valid["n_quotes"] < every["n_quotes"]
    assert {quote["pack_unit"] for quote in valid["quotes"]} <= {"mL", "L"}  # a liquid is sold by volume


def test_structure_tools_agree_with_rdkit(client):
    _, mass = call(client, "compute_molar_mass", smiles="c1ccccc1Br")
    assert mass["molar_mass_g_mol"] == pytest.approx(157.01, abs=0.01) and mass["formula"] == "C6H5Br"
    _, canonical = call(client, "canonicalize_smiles", smiles="C(O)C")
    assert canonical["canonical_smiles"] == "CCO"
    _, similar = call(client, "similar_chemicals", smiles="CCO", limit=3)
    assert similar["matches"][0]["name"] == "ethanol" and similar["matches"][0]["tanimoto"] == 1.0


def test_reactions_are_listed_and_read_without_chemical_ids(client):
    _, listing = call(client, "list_reactions", limit=5)
    assert listing["total"] == 24 and len(listing["reactions"]) == 5
    _, reaction = call(client, "get_reaction", reaction_id=listing["reactions"][0]["reaction_id"])
    assert reaction["components"] and "chemical_id" not in str(reaction)


@pytest.mark.parametrize("query", ["xyzzyq", "x'; DROP TABLE quotes; --"])
def test_a_query_that_names_nothing_is_answered_not_found_and_the_catalogue_is_intact(client, catalogue, query):
    is_error, result = call(client, "search_chemical", query=query)
    assert not is_error and result["found"] is False and result["candidates"] == []
    assert "not in the catalogue" in result["message"]
    assert catalogue.quotes(1)


@pytest.mark.parametrize("name, arguments, message", [
    ("search_chemical", {"query": "50-00-1"}, "check digit"),
    ("compute_molar_mass", {"smiles": "C1CC(("}, "not valid SMILES"),
    ("select_pack", {"chemical_id": 999999, "required_amount": 1.0}, "search_chemical"),
    ("select_pack", {"chemical_id": 1, "required_amount": -5.0}, "greater than 0"),
    ("select_pack", {"chemical_id": 1, "required_amount": 1e12, "unit": "kg"}, "beyond any laboratory"),
    ("convert_quantity", {"value": 1.0, "from_unit": "g", "to_unit": "mmol"}, "needs molar_mass"),
    ("calculate", {"expression": "__import__('os')"}, "only numbers"),
    ("get_reaction", {"reaction_id": "RXN-9999"}, "no reaction"),
    ("search_chemical", {"query": "C" * 5000}, "at most 300"),
])
def test_bad_input_is_a_tool_error_and_the_server_stays_up(client, name, arguments, message):
    is_error, result = call(client, name, **arguments)
    assert is_error and message in str(result)
    is_error, _ = call(client, "calculate", expression="1 + 1")
    assert not is_error


def server_options(small_data) -> tuple[str, str]:
    return "--server-kwargs", json.dumps({"db_path": str(small_data.database),
                                          "reactions_dir": str(small_data.reactions)})


def test_the_server_runs_over_stdio(small_data):
    client = BlockingMCPClient(ServerTarget(command=tuple(serve_command("chem", *server_options(small_data)))),
                               timeout_s=60)
    client.open()
    try:
        result = client.call_tool("search_chemical", {"query": "HATU"})
        assert not result.isError and result.structuredContent["candidates"][0]["name"] == "HATU"
    finally:
        client.close()


def test_the_server_runs_over_streamable_http(small_data):
    with spawn_http_server("chem", *server_options(small_data)) as served:
        assert served.url.startswith("http://127.0.0.1:")
        client = BlockingMCPClient(ServerTarget(url=served.url), timeout_s=60)
        client.open()
        try:
            result = client.call_tool("calculate", {"expression": "2 * (3 + 4)"})
            assert not result.isError and result.structuredContent["value"] == 14.0
        finally:
            client.close()


def test_systematic_names_are_parsed_by_opsin_when_java_is_present(catalogue):
    import shutil

    from gauntlet.mcp_servers.chem.grounding import Grounder

    if shutil.which("java") is None:
        pytest.skip("OPSIN needs Java")
    # A systematic name the catalogue does not list for DIPEA.
    best = Grounder(catalogue, use_opsin=True).search("N-ethyl-N-propan-2-ylpropan-2-amine")[0]
    assert best.name == "N,N-diisopropylethylamine" and best.matched_on == "systematic name (OPSIN)"
