"""The ``register`` step with its model cards: every arm of one target registered and gated
(:func:`context_cda.tracking.run_register_target`), then each version's card written from the evidence into
``register/<target>/<arm>/card/`` (``README.md``, ``.eval_results/``, ``card.json``) and logged with the version:
artifacts ``card/v<version>/`` of the version's run, and the version tag :data:`CARD_TAG` naming them.

The stage table's ``register`` step, ``ccda register`` and the Kubeflow component call :func:`run_register_target`
here, so every door leaves the same cards (``tracking.card.enabled: false`` leaves none).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import layout as L

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config

logger = logging.getLogger(__name__)

#: the version tag naming the card's artifact folder in the version's run (``card/v<version>``)
CARD_TAG = "model_card"


def card_artifact_path(version: str | int) -> str:
    return f"{L.CARD_DIR}/v{version}"


def run_register_target(
    config: Config, inputs: Mapping[str, Path | str], out_dir: Path | str, target: str,
    arms: Sequence[str] | None = None, evaluation: Path | str | None = None,
) -> dict[str, Any]:
    """Register, gate and card every arm of ``target`` (see :func:`context_cda.tracking.run_register_target`);
    each arm's summary gains ``card``: the card's folder."""
    from ..tracking.register import register_inputs
    from ..tracking.register import run_register_target as register

    result = register(config, inputs, out_dir, target, arms=arms, evaluation=evaluation)
    if not config.tracking.card.enabled:
        return result
    seed = config.train.seeds[0]
    for arm, summary in result["arms"].items():
        arm_inputs = register_inputs(config, target, arm, seed, folders=inputs)
        if evaluation is not None:
            arm_inputs["evaluation"] = Path(evaluation)
        folder = Path(out_dir) / L.safe_name(arm, "arm")
        summary["card"] = str(write_card(config, target, arm, folder, arm_inputs, summary))
    return result


def _family(model_dir: Path) -> str | None:
    from transformers import AutoConfig

    from ..models import family_of_config

    try:
        return family_of_config(AutoConfig.from_pretrained(model_dir))
    except Exception:  # noqa: BLE001 - the card says "–"
        return None


def write_card(config: Config, target: str, arm: str, arm_dir: Path, inputs: Mapping[str, Path],
               summary: Mapping[str, Any]) -> Path:
    """The card of (target, arm)'s version into ``arm_dir/card`` (replaced whole), logged with the version when it
    was registered; returns the folder."""
    from ..io import atomic_dir
    from .destination import usual_mode
    from .facts import gather

    facts = gather(config, target, arm, arm_dir, inputs)
    facts["family"] = _family(Path(inputs["model"])) if "model" in inputs else None
    client = None
    if summary.get("registered") and summary.get("version") is not None:
        from ..tracking import get_client

        client = get_client(config)
        facts["model"]["run_id"] = client.get_model_version(summary["model_name"], str(summary["version"])).run_id
    with atomic_dir(arm_dir / L.CARD_DIR) as tmp:
        write_card_files(facts, tmp)
        usual_mode(tmp)
    if client is not None:
        _log(client, summary["model_name"], str(summary["version"]), facts["model"]["run_id"], arm_dir / L.CARD_DIR)
    return arm_dir / L.CARD_DIR


def write_card_files(facts: Mapping[str, Any], folder: Path, license_override: str | None = None,
                     repo_id: str | None = None) -> list[Path]:
    """README.md, .eval_results/*.yaml and card.json (the facts) of a card into ``folder``."""
    from .card import render

    readme, results = render(facts, license_override, repo_id)
    written = [folder / L.CARD_FILE]
    written[0].write_text(readme, encoding="utf-8")
    if results:
        (folder / L.EVAL_RESULTS_DIR).mkdir(exist_ok=True)
    for name, text in results.items():
        written.append(folder / L.EVAL_RESULTS_DIR / name)
        written[-1].write_text(text, encoding="utf-8")
    (folder / L.CARD_FACTS_FILE).write_text(json.dumps(facts, indent=2, default=str), encoding="utf-8")
    return [*written, folder / L.CARD_FACTS_FILE]


def _log(client, name: str, version: str, run_id: str | None, card_dir: Path) -> None:
    """The card's files as artifacts ``card/v<version>/`` of the version's run, and the tag naming them."""
    if not run_id:
        logger.warning("model card of %s v%s: the version has no run to log it to", name, version)
        return
    client.log_artifacts(run_id, str(card_dir), card_artifact_path(version))
    client.set_model_version_tag(name, version, CARD_TAG, card_artifact_path(version))
