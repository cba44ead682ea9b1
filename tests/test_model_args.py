"""``--model-args``: backend constructor arguments from the command line, checked and recorded."""

from __future__ import annotations

import json

import pytest
from conftest import ScriptedBackend

from lumos_gym.cli import main
from lumos_gym.cli.args import parse_model_args
from lumos_gym.errors import LumosGymError, ModelSpecError
from lumos_gym.evaluation.evaluate import ModelOptions, RunConfig, evaluate
from lumos_gym.evaluation.provenance import model_args
from lumos_gym.models.factory import backend_options, build_backend, check_backend_options


def test_pairs_parse_as_json_when_they_can_else_as_text():
    assert parse_model_args(["timeout=120,max_retries=2", "dtype=bf16,prefix_cache=false"]) == {
        "timeout": 120, "max_retries": 2, "dtype": "bf16", "prefix_cache": False,
    }
    # a comma inside a JSON value does not split it; a value may hold '='
    assert parse_model_args(['engine_options={"a": 1, "b": [2, 3]},mode=x=y']) == {
        "engine_options": {"a": 1, "b": [2, 3]}, "mode": "x=y",
    }
    assert parse_model_args(["threads=4, kv_cache_mb=512"]) == {"threads": 4, "kv_cache_mb": 512}
    assert parse_model_args([]) == {}


@pytest.mark.parametrize(("values", "message"), [
    (["timeout"], "expected key=value"),
    (["=3"], "expected key=value"),
    (["timeout=1", "timeout=2"], "timeout is given twice"),
])
def test_malformed_pairs_are_refused(values, message):
    with pytest.raises(LumosGymError, match=message):
        parse_model_args(values)


def test_each_backend_takes_its_constructors_keywords():
    openai, open_ended = backend_options("openai")
    assert {"timeout", "max_retries", "api_key_env", "mode"} <= set(openai) and not open_ended
    assert "base_url" not in openai and "max_concurrency" not in openai  # set by flags
    hf, _ = backend_options("hf")
    assert {"device", "dtype", "max_context", "prefix_cache_mb"} <= set(hf)
    assert "batch_size" not in hf and "adapters" not in hf
    check_backend_options("openai", {"timeout": 5, "max_retries": 0})


def test_an_unknown_key_is_refused_naming_the_backends_keys():
    with pytest.raises(ModelSpecError, match="the openai backend takes no option 'dtype'; "
                       "it takes: .*timeout"):
        check_backend_options("openai", {"dtype": "bf16"})
    with pytest.raises(ModelSpecError, match="'batch_size' is not a model option: --batch-size"):
        check_backend_options("hf", {"batch_size": 2})


def test_the_openai_backend_gets_its_timeout_retries_and_key_variable(monkeypatch):
    monkeypatch.setenv("MY_SERVER_KEY", "s3cret")
    backend = build_backend("openai", "m", base_url="http://127.0.0.1:9", timeout=5,
                            max_retries=1, api_key_env="MY_SERVER_KEY", check=False)
    try:
        assert backend.timeout == 5 and backend.max_retries == 1
        assert backend._client.headers["Authorization"] == "Bearer s3cret"
    finally:
        backend.close()
    monkeypatch.delenv("MY_SERVER_KEY")
    with pytest.raises(ModelSpecError, match=r"api_key_env names \$MY_SERVER_KEY, which is not"):
        build_backend("openai", "m", base_url="http://127.0.0.1:9",
                      api_key_env="MY_SERVER_KEY", check=False)
    with pytest.raises(ModelSpecError, match="failed with the options timeout=-1.*positive"):
        build_backend("openai", "m", base_url="http://127.0.0.1:9", timeout=-1, check=False)


def test_the_command_line_refuses_bad_model_args_before_anything_runs(tmp_path, capsys):
    common = ["evaluate", "--agent", "direct", "--env", "GSM8K-v0", "--limit", "1",
              "--no-progress", "--out", str(tmp_path / "out")]
    cases = [
        (["--backend", "openai", "--base-url", "http://127.0.0.1:9", "--model", "m",
          "--model-args", "tmeout=3"], "the openai backend takes no option 'tmeout'; it takes:"),
        (["--backend", "hf", "--device", "cpu", "--model-args", "device=cuda"],
         "device is given by --device too"),
        (["--backend", "openai", "--base-url", "http://127.0.0.1:9", "--model", "m",
          "--model-args", "api_key=sk-123"], "give api_key_env=VARIABLE"),
    ]
    for flags, message in cases:
        assert main([*common, *flags]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists()


def test_model_args_are_recorded_in_run_json_with_secrets_hidden(tmp_path):
    assert model_args({"api_key": "sk-1", "api_key_env": "MY_KEY", "timeout": 9}) == {
        "api_key": "<hidden>", "api_key_env": "MY_KEY", "timeout": 9,
    }
    # backends given ready: no options were used, none recorded
    evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=1, out=tmp_path / "given",
                       backends={"policy": ScriptedBackend(lambda r: "4")}, progress=False))
    assert "model_args" not in json.loads((tmp_path / "given" / "run.json").read_text())
    # an agent without models records none either
    evaluate(RunConfig("oracle", envs=["GSM8K-v0"], limit=1, out=tmp_path / "oracle",
                       models=ModelOptions(backend="hf", options={"max_context": 64}),
                       progress=False))
    assert "model_args" not in json.loads((tmp_path / "oracle" / "run.json").read_text())
