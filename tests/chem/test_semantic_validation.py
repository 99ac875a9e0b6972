"""Structure tools refuse SMILES that parse but mean nothing: a wildcard atom has no mass, and a blank
string is no molecule; the constraint is in the schema so clients see it."""

from __future__ import annotations

import pytest

from gauntlet.bridges.mcp_client import result_value


@pytest.mark.parametrize("tool", ["compute_molar_mass", "canonicalize_smiles", "similar_chemicals"])
@pytest.mark.parametrize("smiles", ["*", "*C", "c1ccccc1[*]", "[1*]CC"])
def test_a_wildcard_atom_is_refused_not_weighed(client, tool, smiles):
    result = client.call_tool(tool, {"smiles": smiles})
    assert result.isError
    text = result.content[0].text
    assert "wildcard" in text and "c1ccccc1Br" in text


@pytest.mark.parametrize("smiles", ["", "   "])
def test_a_blank_smiles_is_refused_naming_the_argument(client, smiles):
    result = client.call_tool("compute_molar_mass", {"smiles": smiles})
    assert result.isError and "argument 'smiles'" in result.content[0].text


def test_the_smiles_constraint_is_declared_in_the_schema(client):
    schema = {tool.name: tool.inputSchema for tool in client.list_tools()}["compute_molar_mass"]
    assert schema["properties"]["smiles"]["minLength"] == 1
    assert "pattern" in schema["properties"]["smiles"]


def test_a_real_structure_still_has_its_molar_mass(client):
    result = client.call_tool("compute_molar_mass", {"smiles": "CCO"})
    assert not result.isError
    assert result_value(result)["molar_mass_g_mol"] == pytest.approx(46.069, abs=1e-3)
