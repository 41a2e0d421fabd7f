"""`ccda export --model NAME --version N --to DIR` on a local registry (sqlite): the folder holds the weights as
safetensors, the tokenizer, the model card and its evaluation results, loads with transformers and huggingface_hub,
and holds no pickle; every refusal is one `error:` line and writes nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from tests.helpers.card_run import card_config, copy_model, crafted_run

from context_cda import layout as L
from context_cda.cli import main

pytest.importorskip("mlflow")
pytest.importorskip("huggingface_hub")
NOISE = re.compile(r"^\d\d:\d\d:\d\d |Downloading artifacts|it/s\]")


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """A run with two targets registered: ``tg`` (tiny GPT-2, MLflow's transformers flavour: the project's
    licence) and ``nolic`` (a copy of it in a plain folder that records no licence; the folder flavour); and a
    version of ``tg-debiased`` registered by hand, with no evidence."""
    from mlflow.tracking import MlflowClient

    from context_cda.models import resolve_pretrained
    from context_cda.publish import run_register_target
    from context_cda.stages import step_inputs

    tmp = tmp_path_factory.mktemp("registry")
    run, uri = tmp / "run", f"sqlite:///{tmp / 'mlflow.db'}"
    plain = copy_model(Path(resolve_pretrained("tiny:gpt2")), tmp / "plain-gpt2")
    targets = {"tg": "tiny:gpt2", "nolic": str(plain)}
    aggs = {t: crafted_run(run, t, ref) for t, ref in targets.items()}
    for t, flavor in (("tg", "auto"), ("nolic", "folder")):
        cfg = card_config(run, targets, uri=uri, model_flavor=flavor)
        run_register_target(cfg, step_inputs(cfg, "register", target=t), run / "register" / t, t)
    client = MlflowClient(uri, uri)
    bare = client.create_model_version("tg-debiased", source=str(plain), run_id=None)
    return {"run": run, "uri": uri, "aggs": aggs, "bare": bare.version, "tmp": tmp}


def export(registry, capsys, *args: str) -> tuple[int, list[str], str]:
    capsys.readouterr()
    code = main(["export", "--tracking-uri", registry["uri"], *args])
    out = capsys.readouterr()
    return code, [ln for ln in out.err.splitlines() if ln.strip() and not NOISE.search(ln)], out.out


def test_a_version_exports_as_an_uploadable_folder(registry, capsys, tmp_path):
    from huggingface_hub import ModelCard, parse_eval_result_entries
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dest = tmp_path / "tg-debiased-v1"
    code, err, out = export(registry, capsys, "--model", "tg-debiased", "--version", "1", "--to", str(dest),
                            "--repo-id", "someone/tg-debiased")
    assert code == 0, err
    names = {str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json", "README.md",
            ".eval_results/stereoset.yaml", ".eval_results/crows.yaml"} <= names
    assert not [n for n in names if n.endswith((".bin", ".pkl", ".pt", ".pth", "MLmodel", ".json.tmp"))]
    assert "card.json" not in names and "LICENSE.txt" not in names
    card = ModelCard.load(dest / "README.md")
    metrics = {k: v for k, v in registry["aggs"]["tg"]["metrics"].items() if "_ci_" not in k}
    assert card.data.license == "apache-2.0" and {r.metric_type for r in card.data.eval_results} == set(metrics)
    entries = [e for p in sorted((dest / L.EVAL_RESULTS_DIR).glob("*.yaml"))
               for e in parse_eval_result_entries(yaml.safe_load(p.read_text()))]
    assert {e.task_id: e.value for e in entries} == metrics
    assert {e.source_url for e in entries} == {"https://huggingface.co/someone/tg-debiased"}
    model = AutoModelForCausalLM.from_pretrained(dest)
    assert model.config.model_type == "gpt2" and AutoTokenizer.from_pretrained(dest)("he said")["input_ids"]
    assert "tg-debiased v1 ->" in out


def test_a_licence_nothing_records_is_refused_until_named(registry, capsys, tmp_path):
    dest = tmp_path / "out"
    code, err, _ = export(registry, capsys, "--model", "nolic-debiased", "--version", "1", "--to", str(dest))
    assert code == 2 and len(err) == 1, err
    assert re.match(r"error: models:/nolic-debiased/1: the licence of its base model .*plain-gpt2 is unknown .*"
                    r"--license ID .*tracking\.card\.licenses\.nolic", err[0]), err[0]
    assert not dest.exists()
    code, err, _ = export(registry, capsys, "--model", "nolic-debiased", "--version", "1", "--to", str(dest),
                          "--license", "mit")
    assert code == 0, err
    text = (dest / "README.md").read_text()
    assert "license: mit" in text and "(named at export)" in text
    assert (dest / "model.safetensors").is_file() and (dest / "tokenizer.json").is_file()


@pytest.mark.parametrize(("what", "args", "expect"), [
    ("no evidence", ("--model", "tg-debiased", "--version", "{bare}"),
     r"error: models:/tg-debiased/\d+: the version carries no evidence \(per-item evidence, model card not logged "
     r"with it.*register it again"),
    ("no such version", ("--model", "tg-debiased", "--version", "99"),
     r"error: models:/tg-debiased/99: no such registered version"),
    ("no such model", ("--model", "nobody-debiased", "--version", "1"),
     r"error: models:/nobody-debiased/1: no such registered version"),
])
def test_versions_that_cannot_be_exported_are_one_line(registry, capsys, tmp_path, what, args, expect):
    dest = tmp_path / "out"
    args = tuple(a.format(bare=registry["bare"]) for a in args)
    code, err, _ = export(registry, capsys, *args, "--to", str(dest))
    assert code == 2 and len(err) == 1 and re.match(expect, err[0]), (what, err)
    assert not dest.exists() and not list(tmp_path.glob(".out*"))


def test_a_folder_that_is_not_empty_is_left_alone(registry, capsys, tmp_path):
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "notes.txt").write_text("keep me")
    code, err, _ = export(registry, capsys, "--model", "tg-debiased", "--version", "1", "--to", str(dest))
    assert code == 2 and len(err) == 1 and re.match(r"error: .*mine: the folder exists and is not empty", err[0])
    assert [p.name for p in dest.iterdir()] == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert export(registry, capsys, "--model", "tg-debiased", "--version", "1", "--to", str(empty))[0] == 0
    assert (empty / "model.safetensors").is_file()  # an empty folder is fine


def test_the_card_is_logged_with_the_version(registry):
    from mlflow.tracking import MlflowClient

    from context_cda.publish.register import CARD_TAG

    client = MlflowClient(registry["uri"], registry["uri"])
    mv = client.get_model_version("tg-debiased", "1")
    assert mv.tags[CARD_TAG] == "card/v1"
    listed = {f.path for f in client.list_artifacts(mv.run_id, "card/v1")}
    assert {"card/v1/README.md", "card/v1/card.json", "card/v1/.eval_results"} <= listed
    local = registry["run"] / "register" / "tg" / "cda" / L.CARD_DIR / L.CARD_FILE
    assert "tg-debiased v1" in local.read_text() and f"(run {mv.run_id})" in local.read_text()
