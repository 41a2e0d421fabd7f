"""``ccda export --model NAME --version N --to DIR``: a registered version as a folder a user uploads to a model hub
as is (``huggingface-cli upload OWNER/NAME DIR``): the weights as safetensors, the tokenizer, the model card
(``README.md``) and the evaluation results (``.eval_results/``), written from the card's facts logged with the
version (:mod:`.register`), so the card is the run's, not typed by hand. No pickle leaves: only the files of a
``save_pretrained`` folder are copied (a post-hoc arm's note and matrix beside them), never MLflow's pickled python
models, environments or metadata.

Refused, each with one line and nothing written: a destination that exists and is not empty; a version that does
not exist; a version without evidence (no per-item evidence or no card logged with it: registered before either
existed); a base model whose licence nothing records (name it: ``--license``, or ``tracking.card.licenses``); a
version whose weights exist only as pickles.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from fnmatch import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import layout as L
from ..errors import InputError
from .destination import fresh_destination, usual_mode

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config

#: the files of a model folder that travel: weights (safetensors), configs, tokenizer files, a post-hoc arm's note
KEEP = ("*.safetensors", "model.safetensors.index.json", "config.json", "generation_config.json", "tokenizer.json",
        "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.json", "vocab.txt",
        "merges.txt", "*.model", "chat_template.jinja", "chat_template.json", "preprocessor_config.json",
        "ccda_arm.json")
#: weights in a pickle-based format: never exported (a folder with only these is refused)
PICKLED = ("*.bin", "*.pt", "*.pth", "*.pkl", "*.ckpt")


def _existing_registry(config: Config) -> Config:
    """``config`` when its registry exists (a local sqlite database is never created by an export)."""
    from ..tracking import tracking_uri

    uri = tracking_uri(config)
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).is_file():
        raise InputError(f"{uri[len('sqlite:///'):]}: no model registry there (tracking.uri / MLFLOW_TRACKING_URI "
                         "names the registry the versions were registered in; use the run's --profile or "
                         "--tracking-uri).")
    return config


def _version(client, name: str, version: str):
    try:
        return client.get_model_version(name, version)
    except Exception as e:  # noqa: BLE001 - the registry's own message names what is missing
        raise InputError(f"models:/{name}/{version}: no such registered version ({str(e).splitlines()[0]}); list "
                         "them in the MLflow UI or `mlflow models` (the register step names each version).") from None


def card_facts(client, name: str, version: str, mv) -> dict[str, Any]:
    """The facts of the card logged with the version; an InputError when the version carries no evidence."""
    from ..tracking.register import EVIDENCE_TAG
    from .register import CARD_TAG

    tags = mv.tags or {}
    if not tags.get(EVIDENCE_TAG) or not tags.get(CARD_TAG) or not mv.run_id:
        lacks = ", ".join(what for what, key in (("per-item evidence", EVIDENCE_TAG), ("model card", CARD_TAG))
                          if not tags.get(key)) or "a run"
        raise InputError(f"models:/{name}/{version}: the version carries no evidence ({lacks} not logged with it: it "
                         "was registered without per-item predictions or before model cards); register it again "
                         "from its run (ccda register) and export the new version.")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            local = client.download_artifacts(mv.run_id, f"{tags[CARD_TAG]}/{L.CARD_FACTS_FILE}", tmp)
            return json.loads(Path(local).read_text(encoding="utf-8"))
        except Exception as e:  # noqa: BLE001 - artifacts deleted or unreachable
            raise InputError(f"models:/{name}/{version}: its model card ({tags[CARD_TAG]}) cannot be read from the "
                             f"run's artifacts ({str(e).splitlines()[0]}).") from None


def _licence(facts: dict[str, Any], given: str | None, name: str, version: str) -> str:
    licence = given or facts["base"].get("license")
    if not licence:
        base = facts["base"]
        raise InputError(f"models:/{name}/{version}: the licence of its base model {base['ref']} is unknown (nothing "
                         f"records it: {base.get('license_from')}); name it with --license ID (a Hub licence id such "
                         f"as apache-2.0, mit, llama3.2), or set tracking.card.licenses.{base['target']} and "
                         "register again.")
    return licence


def model_files(config: Config, name: str, version: str, tmp: Path) -> list[Path]:
    """The version's model folder files that travel (:data:`KEEP`), downloaded into ``tmp``."""
    import mlflow

    from ..tracking import tracking_uri
    from ..tracking.flavors import fluent_uri

    with fluent_uri(tracking_uri(config)):
        root = Path(mlflow.artifacts.download_artifacts(artifact_uri=f"models:/{name}/{version}", dst_path=str(tmp)))
    files = [p for p in sorted(root.rglob("*")) if p.is_file() and any(fnmatch(p.name, k) for k in KEEP)]
    if not any(fnmatch(p.name, "*.safetensors") for p in files):
        pickled = [p.name for p in root.rglob("*") if any(fnmatch(p.name, k) for k in PICKLED)]
        raise InputError(f"models:/{name}/{version}: no safetensors weights in the version"
                         + (f" (only pickled ones: {', '.join(pickled)}; they are never exported)" if pickled else "")
                         + "; register it again with tracking.model_flavor auto or folder.")
    clash = {p.name for p in files if sum(q.name == p.name for q in files) > 1}
    if clash:
        raise InputError(f"models:/{name}/{version}: {', '.join(sorted(clash))} found twice in the version's files; "
                         "cannot tell which belongs to the model.")
    return files


def validate(folder: Path) -> int:
    """Load the folder's card and evaluation results with huggingface_hub's classes (what the Hub reads); returns
    the number of evaluation-result entries."""
    import yaml
    from huggingface_hub import ModelCard, parse_eval_result_entries

    card = ModelCard.load(folder / L.CARD_FILE)
    if card.data.eval_results is None and card.data.to_dict().get("model-index"):
        raise InputError(f"{folder / L.CARD_FILE}: its model-index does not parse as evaluation results.")
    entries = 0
    for p in sorted((folder / L.EVAL_RESULTS_DIR).glob("*.yaml")):
        entries += len(parse_eval_result_entries(yaml.safe_load(p.read_text(encoding="utf-8"))))
    return entries


def export_version(config: Config, name: str, version: str, to: Path | str, license_id: str | None = None,
                   repo_id: str | None = None) -> dict[str, Any]:
    """Write ``models:/<name>/<version>`` as an uploadable folder ``to`` (new or empty; whole or not at all)."""
    from ..io import atomic_dir
    from ..tracking import get_client
    from .register import write_card_files

    dest = fresh_destination(to, "model folder")
    client = get_client(_existing_registry(config))
    mv = _version(client, name, version)
    facts = card_facts(client, name, version, mv)
    licence = _licence(facts, license_id, name, version)
    with tempfile.TemporaryDirectory(prefix=".ccda-export-", dir=dest.parent if dest.parent.is_dir() else None) as t:
        files = model_files(config, name, version, Path(t))
        with atomic_dir(dest) as out:
            for p in files:
                shutil.copyfile(p, out / p.name)
            write_card_files(facts, out, licence, repo_id)
            (out / L.CARD_FACTS_FILE).unlink()  # the facts stay with the version; the folder holds what a hub shows
            entries = validate(out)
            usual_mode(out)
    return {"model": name, "version": str(version), "to": str(dest), "license": licence, "eval_results": entries,
            "files": sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())}
