"""What the latent monitor costs an agent's step, on the offline model (CPU, one torch thread).

    gauntlet bench latent [--quick] [--out PATH] [--model FILE] [--score FILE]

Every prompt is answered twice, the order alternating: once as the agent decodes without a monitor
(the baseline) and once with the monitor's layer kept while it decodes (``LoadedWeights.watch``);
the prefix cache is off, so both read the whole prompt. Then the same reply is scored two ways: from
the kept decoding states (what the live monitor does when the agent runs the reader model) and by the
reader reading conversation and reply again (a standalone monitor). Reported: the decoding overhead
of keeping the states, each way's monitor cost as a share of the step's model time (the issue's
target for reuse: <= 5 %), and the standalone reader's tokens/s. Prompts are the user-channel cases of
the instruction-hierarchy suite (one per rule in ``--quick``, three per rule otherwise).

``--backend llama`` (the default: the agent's default backend) measures the same on llama.cpp, where the
agent keeps the layer with ``keep_hidden_layers`` (llama.cpp's evaluation callback): decoding alone vs
decoding while keeping it, the prefix cache off, one thread, greedy, then the detector scoring the kept states.
Keeping a layer can change a greedy reply (llama.cpp hands the states out while it evaluates, and the
last bits of the logits may differ): the replies that differ are counted, and the costs are taken over
the prompts whose two replies are the same (the same work). There is no standalone reader row:
llama.cpp reads no prompt without decoding. ``--backend transformers`` is the measurement above.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from _reporting import bench_parser, figures_table, save_report, show



def conversations(per_rule: int) -> list[list[Any]]:
    from langchain_core.messages import HumanMessage, SystemMessage

    from gauntlet.controllers.latent.hierarchy import RULES, hierarchy_suite

    cases = [case for case in hierarchy_suite(per_cell=per_rule) if case.channel == "user"]
    chosen = [case for rule in RULES for case in cases if case.rule == rule][:len(RULES) * per_rule * 2:2]
    return [[SystemMessage(case.messages[0]["content"]), HumanMessage(case.messages[1]["content"])] for case in chosen]


def measure(model_file: str, score_file: str, per_rule: int, max_new_tokens: int) -> dict[str, Any]:
    from gauntlet.agents.llm.kept_states import ReplyStates
    from gauntlet.agents.llm.local_chat import LocalChatModel, load_weights
    from gauntlet.controllers.latent.detector_file import reply_states
    from gauntlet.controllers.latent.monitor import LatentMonitor, reply_text

    plain = LocalChatModel(model_path=model_file, max_new_tokens=max_new_tokens, reuse_prefix=False)
    weights = load_weights(model_file)
    monitor = LatentMonitor(score_file, reader=model_file)  # watches its layer from here on
    layer = monitor.score.layer
    weights.watched.clear()
    rows = []
    for index, messages in enumerate(conversations(per_rule)):
        timings, replies = {}, {}
        for keep in ((False, True) if index % 2 == 0 else (True, False)):
            weights.watched = {weights.layer_number(layer)} if keep else set()
            start = time.perf_counter()
            replies[keep] = plain.invoke(messages)
            timings[keep] = (time.perf_counter() - start) * 1e3
        weights.watched.clear()
        reply = replies[True]  # the decoding that kept the layer (every other prompt decodes it first)
        carried = ReplyStates.of(reply)
        kept = carried.layer(layer) if carried is not None else None
        start = time.perf_counter()
        reused = monitor.verdict(monitor.score.divergence(kept))
        reuse_ms = (time.perf_counter() - start) * 1e3
        # The second read on the agent's runtime: the monitor's own reader of a .gguf file is llama.cpp, whose
        # quantised arithmetic moves the score by up to ~1 % against transformers' fp32 states.
        start = time.perf_counter()
        text = reply_text(reply)
        reread = monitor.verdict(monitor.value(reply_states(plain, messages, text, layer), text))
        reread_ms = (time.perf_counter() - start) * 1e3
        usage = reply.usage_metadata or {"input_tokens": 0, "output_tokens": 0}
        rows.append({"prompt_tokens": usage["input_tokens"], "reply_tokens": usage["output_tokens"],
                     "decode_ms": timings[False], "decode_keeping_ms": timings[True], "monitor_reuse_ms": reuse_ms,
                     "monitor_reread_ms": reread_ms, "chaos_reused": reused["chaos"], "chaos_reread": reread["chaos"]})
    total = {key: sum(row[key] for row in rows) for key in rows[0]}
    return {
        "model": Path(model_file).name, "layer": layer, "steps": len(rows), "max_new_tokens": max_new_tokens,
        "rows": rows, **reuse_costs(rows, rows),
        "reread_share_of_step": total["monitor_reread_ms"] / total["decode_ms"],
        "monitor_reread_ms_median": statistics.median(row["monitor_reread_ms"] for row in rows),
        "reader_tokens_per_s": (total["prompt_tokens"] + total["reply_tokens"]) / total["monitor_reread_ms"] * 1e3,
    }


def reuse_costs(rows: list[dict[str, Any]], compared: list[dict[str, Any]]) -> dict[str, float]:
    """What keeping the layer and scoring from it cost, summed over the ``compared`` rows (both backends)."""
    total = {key: sum(row[key] for row in compared)
             for key in ("decode_ms", "decode_keeping_ms", "monitor_reuse_ms", "reply_tokens")}
    return {
        "keeping_overhead": total["decode_keeping_ms"] / total["decode_ms"] - 1,
        "reuse_share_of_step": (total["decode_keeping_ms"] - total["decode_ms"] + total["monitor_reuse_ms"])
        / total["decode_ms"],
        "monitor_reuse_ms_median": statistics.median(row["monitor_reuse_ms"] for row in rows),
        "decode_tokens_per_s": total["reply_tokens"] / total["decode_ms"] * 1e3,
    }


def reuse_table(title: str, report: dict[str, Any]) -> Any:
    """The figures table with the rows both backends report: keeping the layer, and the monitor reusing it."""
    table = figures_table(title, ("figure", "measured", "baseline", "target"))
    table.add_row("decoding while keeping the layer's states", f"{report['keeping_overhead']:+.1%}",
                  f"decoding alone {report['decode_tokens_per_s']:.1f} tok/s", "(info)")
    table.add_row("monitor reusing the agent's forward: share of the step's model time",
                  f"{report['reuse_share_of_step']:.2%}", f"median {report['monitor_reuse_ms_median']:.2f} ms/step",
                  "<= 5 %")
    return table


def measure_llama(model_file: str, score_file: str, per_rule: int, max_new_tokens: int) -> dict[str, Any]:
    from gauntlet.agents.llm.kept_states import ReplyStates
    from gauntlet.agents.llm.llama_chat import LlamaChatModel
    from gauntlet.controllers.latent.monitor import detector_threshold, detector_value, fitted_detector

    detector = fitted_detector(score_file, reader=None)
    layer = detector.layer
    plain = LlamaChatModel(model_path=model_file, max_new_tokens=max_new_tokens, threads=1, reuse_prefix=False,
                           persist_prefix=False, constrain_calls=False)
    keeping = plain.model_copy(update={"keep_hidden_layers": (layer,)})
    plain.invoke(conversations(1)[0])  # loads the model once, outside the timings
    rows = []
    for index, messages in enumerate(conversations(per_rule)):
        timings, replies = {}, {}
        for keep in ((False, True) if index % 2 == 0 else (True, False)):
            start = time.perf_counter()
            replies[keep] = (keeping if keep else plain).invoke(messages)
            timings[keep] = (time.perf_counter() - start) * 1e3
        carried = ReplyStates.of(replies[True])
        kept = carried.layer(layer) if carried is not None else None
        if kept is None or not len(kept):
            raise RuntimeError(f"the reply to prompt {index} carries no states of layer {layer}")
        start = time.perf_counter()
        decision = detector_value(detector, kept) - detector_threshold(detector)
        reuse_ms = (time.perf_counter() - start) * 1e3
        usage = replies[False].usage_metadata or {"input_tokens": 0, "output_tokens": 0}
        kept_usage = replies[True].usage_metadata or {"output_tokens": 0}
        rows.append({"prompt_tokens": usage["input_tokens"], "reply_tokens": usage["output_tokens"],
                     "reply_tokens_keeping": kept_usage["output_tokens"],
                     "decode_ms": timings[False], "decode_keeping_ms": timings[True], "monitor_reuse_ms": reuse_ms,
                     "decision": decision, "same_reply": replies[False].content == replies[True].content})
    # The costs compare like with like: the prompts whose two decodings wrote the same reply (the same work).
    same = [row for row in rows if row["same_reply"]] or rows
    return {
        "backend": "llama", "model": Path(model_file).name, "layer": layer, "steps": len(rows),
        "max_new_tokens": max_new_tokens, "rows": rows, "costs_over_steps": len(same), **reuse_costs(rows, same),
        "same_replies": sum(row["same_reply"] for row in rows),
        "differing_replies": [index for index, row in enumerate(rows) if not row["same_reply"]],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = bench_parser("latent", __doc__ or "")
    parser.add_argument("--model", default=None,
                        help="the agent and reader model (default: the small offline model, the shipped score's)")
    parser.add_argument("--score", default=None, help="a fitted chaos score of that model (default: the shipped one)")
    parser.add_argument("--backend", choices=("llama", "transformers"), default="llama",
                        help="the agent's decoding backend (default llama: the offline agent's)")
    args = parser.parse_args(argv)
    model = args.model
    if model is None:
        from gauntlet.agents.llm.offline_model import model_path

        model = str(model_path("small"))
    if args.score is None:
        from gauntlet.controllers.latent.monitor import shipped_score

        args.score = str(shipped_score())
    sizes = {"per_rule": 1 if args.quick else 3, "max_new_tokens": 24 if args.quick else 64}
    if args.backend == "llama":
        report = measure_llama(model, args.score, **sizes)
        table = reuse_table(f"gauntlet bench latent (llama.cpp, {report['model']}, layer {report['layer']}, "
                            f"{report['steps']} steps, CPU, 1 thread)", report)
        table.add_row("the same reply with and without keeping (greedy; costs over these)",
                      f"{report['same_replies']} of {report['steps']}", "", "(info)")
        show(table)
        save_report(report, args.out)
        return report
    report = {"backend": "transformers", **measure(model, args.score, **sizes)}
    table = reuse_table(f"gauntlet bench latent ({report['model']}, layer {report['layer']}, "
                        f"{report['steps']} steps, CPU, 1 thread)", report)
    table.add_row("standalone monitor (reads the step again): share of the step's model time",
                  f"{report['reread_share_of_step']:.1%}", f"median {report['monitor_reread_ms_median']:.0f} ms/step",
                  "(info)")
    table.add_row("standalone reader", f"{report['reader_tokens_per_s']:.0f} tok/s", "", "(info)")
    show(table)
    save_report(report, args.out)
    return report


if __name__ == "__main__":
    main()
