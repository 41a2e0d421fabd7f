"""The report's "Registry decisions": each registered version's decision and aliases, in the registry's words.

The decision of every (target, arm) comes from the register step's ``promotion.json``; its word and the aliases
are those of :mod:`context_cda.tracking.decisions`, the vocabulary the registry's tags use. The aliases are read
from the registry itself when it can be reached (they move: ``candidate`` sits on the newest version only), else
derived from this run's decisions, and the table says which.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import layout as L
from ..errors import InputError
from ..io import read_json
from ..tracking import decisions as D

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config

log = logging.getLogger(__name__)


@dataclass
class Row:
    target: str
    arm: str
    model_name: str | None
    version: str | None
    decision: str
    reasons: list[str]
    aliases: list[str] = field(default_factory=list)
    verdict: str = ""  # one of decisions.VERDICTS ("" in a promotion.json written before the four states)
    note: str = ""


@dataclass
class Decisions:
    rows: list[Row]
    source: str  # where the aliases come from: "the registry (<uri>)" or "this run's decisions"

    def __bool__(self) -> bool:
        return bool(self.rows)


def read(register_dir: Path | None) -> list[Row]:
    """One row per ``register/<target>/<arm>/promotion.json`` (in version order)."""
    rows = []
    for p in sorted(Path(register_dir).glob(f"*/*/{L.PROMOTION_FILE}")) if register_dir else []:
        try:
            d = read_json(p)
        except InputError:
            continue
        version = d.get("version")
        rows.append(Row(p.parent.parent.name, p.parent.name, d.get("model_name"),
                        None if version is None else str(version),
                        d.get("decision") or D.decision(bool(d.get("promote"))), list(d.get("reasons", [])),
                        verdict=str(d.get("verdict") or ""), note=str(d.get("note") or "")))
    return sorted(rows, key=lambda r: (r.target, int(r.version) if (r.version or "").isdigit() else 0, r.arm))


def _from_registry(config: Config, rows: list[Row]) -> bool:
    """Fill each row's aliases (and its decision tag, which wins over the file) from the registry; False when it
    cannot be reached."""
    from ..tracking import get_client, tracking_uri

    try:
        client = get_client(config)
        for r in rows:
            if r.model_name is None or r.version is None:
                continue
            mv = client.get_model_version(r.model_name, r.version)
            r.aliases = sorted(getattr(mv, "aliases", None) or [])
            tags = mv.tags or {}
            r.decision = tags.get(D.DECISION_TAG, r.decision)
            r.verdict, r.note = tags.get(D.VERDICT_TAG, r.verdict), tags.get(D.NOTE_TAG, r.note)
    except Exception as e:  # noqa: BLE001 - the report is still written, with the aliases derived
        log.warning("report: the model registry at %s could not be read (%s); aliases derived from this run's "
                    "decisions", tracking_uri(config), e)
        return False
    return True


def _derived(rows: list[Row]) -> None:
    """The aliases this run's decisions leave, per model: candidate on the newest version, champion on the newest
    promoted one."""
    by_model: dict[str, list[Row]] = {}
    for r in rows:
        if r.version is not None:
            by_model.setdefault(r.model_name or r.target, []).append(r)
    for group in by_model.values():
        group[-1].aliases.append(D.CANDIDATE)
        promoted = [r for r in group if r.decision == D.PROMOTED]
        if promoted:
            promoted[-1].aliases.append(D.CHAMPION)
        for r in group:
            r.aliases.sort()


def collect(config: Config, register_dir: Path | None) -> Decisions:
    rows = read(register_dir)
    registered = [r for r in rows if r.version is not None]
    if registered and config.tracking.enabled and _from_registry(config, registered):
        from ..tracking import tracking_uri

        return Decisions(rows, f"the registry ({tracking_uri(config)})")
    _derived(rows)
    return Decisions(rows, "this run's decisions (the registry was not read)")


def markdown(dec: Decisions, label: Any = str) -> list[str]:
    if not dec:
        return []
    lines = ["## Registry decisions", "", f"{D.LEGEND} Aliases below: from {dec.source}.", "",
             "| Target | Arm | Model | Version | Decision | Verdict | Aliases now | Reasons |",
             "|---|---|---|---:|---|---|---|---|"]
    for r in dec.rows:
        reasons = "; ".join(r.reasons).replace("|", "\\|")
        verdict = D.verdict_line(r.verdict, r.note).replace("|", "\\|") if r.verdict else "–"
        lines.append(f"| {r.target} | {label(r.arm)} | {r.model_name or '–'} | {r.version or 'not registered'} | "
                     f"**{r.decision}** | {verdict} | {', '.join(r.aliases) or 'none'} | {reasons} |")
    return [*lines, ""]
