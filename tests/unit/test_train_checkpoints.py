"""Checkpoints after evaluation (a kill between an epoch's evaluation and its checkpoint loses no metrics row) and
checkpoint retention (the last full training state, plus per-epoch weights on request)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

from tests.unit.test_train import SENTENCES, _run_cfg, fake_eval  # noqa: E402

from context_cda.train import loop  # noqa: E402


class Killed(Exception):
    pass


def _kill_between_eval_and_checkpoint_of(epoch: int, monkeypatch) -> None:
    real = loop._save_checkpoint

    def save(acc, out, ep, *a, **k):
        if ep == epoch:
            assert 0 <= ep and (Path(out) / "metrics.csv").is_file()
            raise Killed  # the epoch's metrics row is written, its checkpoint is not
        return real(acc, out, ep, *a, **k)

    monkeypatch.setattr(loop, "_save_checkpoint", save)


def _corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus.parquet"
    pd.DataFrame({"text": SENTENCES * 2}).to_parquet(corpus)
    return corpus


def test_a_kill_between_evaluation_and_checkpoint_loses_no_epoch(tmp_path, monkeypatch):
    from safetensors.torch import load_file

    from context_cda.train import run_finetune

    corpus, cfg = _corpus(tmp_path), _run_cfg(tmp_path)
    common = dict(token_budget=150, evaluate_fn=fake_eval)
    run_finetune(cfg, {"corpus": corpus}, tmp_path / "a", "tg", "context-cda", **common)

    out = tmp_path / "b"
    with monkeypatch.context() as m:
        _kill_between_eval_and_checkpoint_of(2, m)
        with pytest.raises(Killed):
            run_finetune(cfg, {"corpus": corpus}, out, "tg", "context-cda", **common)
    assert list(pd.read_csv(out / "metrics.csv")["epoch"]) == [0, 1, 2]  # epoch 2 evaluated, not checkpointed
    assert (out / "checkpoints" / "epoch-1" / "state.json").is_file()
    assert not (out / "checkpoints" / "epoch-2").exists()

    res = run_finetune(cfg, {"corpus": corpus}, out, "tg", "context-cda", **common)
    assert res["resumed_from_epoch"] == 1  # epoch 2 is redone, its row rewritten once
    ma, mb = pd.read_csv(tmp_path / "a" / "metrics.csv"), pd.read_csv(out / "metrics.csv")
    assert list(mb["epoch"]) == [0, 1, 2, 3]
    pd.testing.assert_frame_equal(ma, mb)
    a, b = load_file(tmp_path / "a" / "final" / "model.safetensors"), load_file(out / "final" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


_SIGKILL_SCRIPT = """
import json, os, signal, sys
sys.path.insert(0, {root!r})
from context_cda.config import Config
from context_cda.train import loop, run_finetune
from tests.unit.test_train import fake_eval
real = loop._save_checkpoint
def save(acc, out, epoch, *a, **k):
    if epoch == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(acc, out, epoch, *a, **k)
loop._save_checkpoint = save
cfg = Config.model_validate(json.loads({cfg!r}))
run_finetune(cfg, {{"corpus": {corpus!r}}}, {out!r}, "tg", "context-cda", token_budget=150, evaluate_fn=fake_eval)
"""


@pytest.mark.slow
def test_sigkill_between_evaluation_and_checkpoint_loses_no_epoch(tmp_path):
    from context_cda.train import run_finetune

    corpus, cfg, out = _corpus(tmp_path), _run_cfg(tmp_path), tmp_path / "b"
    script = _SIGKILL_SCRIPT.format(root=str(Path(__file__).resolve().parents[2]), cfg=json.dumps(cfg.to_dict()),
                                    corpus=str(corpus), out=str(out))
    proc = subprocess.run([sys.executable, "-c", script], env={**os.environ, "HF_HUB_OFFLINE": "1"},
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == -9, proc.stderr[-3000:]
    assert list(pd.read_csv(out / "metrics.csv")["epoch"]) == [0, 1, 2]
    res = run_finetune(cfg, {"corpus": corpus}, out, "tg", "context-cda", token_budget=150, evaluate_fn=fake_eval)
    assert res["resumed_from_epoch"] == 1 and list(pd.read_csv(out / "metrics.csv")["epoch"]) == [0, 1, 2, 3]


def _sizes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


@pytest.mark.parametrize(("keep", "weights"), [(1, False), (2, False), (1, True)])
def test_only_the_last_training_states_are_kept(tmp_path, keep, weights):
    from context_cda.train import run_finetune

    cfg = _run_cfg(tmp_path, keep_checkpoints=keep, keep_epoch_weights=weights, keep_resume_state=True)
    out = tmp_path / "o"
    run_finetune(cfg, {"corpus": _corpus(tmp_path)}, out, "tg", "context-cda", token_budget=150, evaluate=False)
    ck = out / "checkpoints"
    full = sorted(d.name for d in ck.iterdir() if (d / "state.json").is_file())
    assert full == [f"epoch-{e}" for e in range(4 - keep, 4)]  # the newest `keep` of 3 epochs
    older = sorted(d.name for d in ck.iterdir() if d.name not in full)
    if weights:
        assert older == ["epoch-1", "epoch-2"]
        for d in older:
            assert sorted(f.name for f in (ck / d).iterdir()) == ["model.safetensors"]
    else:
        assert older == []
    final = _sizes(out / "final")
    # disk: about (1 + 2 for AdamW's moments) x the model per full state, plus one model per kept weights file
    assert _sizes(ck) < (3.5 * keep + (2 if weights else 0)) * final
    assert loop.last_checkpoint(out)[0] == 3


@pytest.mark.parametrize("weights", [False, True])
def test_a_finished_run_keeps_its_final_model_and_no_resume_state(tmp_path, weights):
    from context_cda.train import run_finetune

    cfg = _run_cfg(tmp_path, keep_epoch_weights=weights)
    out = tmp_path / "o"
    run_finetune(cfg, {"corpus": _corpus(tmp_path)}, out, "tg", "context-cda", token_budget=150, evaluate=False)
    assert (out / "final" / "model.safetensors").is_file() and loop.last_checkpoint(out) is None
    if weights:  # the epochs' weights stay, their optimizer states do not
        kept = sorted(str(f.relative_to(out / "checkpoints")) for f in (out / "checkpoints").rglob("*") if f.is_file())
        assert kept == [f"epoch-{e}/model.safetensors" for e in (1, 2, 3)]
    else:
        assert not (out / "checkpoints").exists()


def test_drop_resume_state_frees_what_it_deletes(tmp_path):
    ck = tmp_path / "checkpoints"
    for e in (1, 2):
        (ck / f"epoch-{e}").mkdir(parents=True)
        (ck / f"epoch-{e}" / "state.json").write_text("{}")
        (ck / f"epoch-{e}" / "optimizer.bin").write_bytes(b"o" * 100)
    (ck / ".epoch-3.tmp").mkdir()
    (ck / ".epoch-3.tmp" / "optimizer.bin").write_bytes(b"o" * 50)
    assert loop.drop_resume_state(tmp_path) == 2 * (100 + 2) + 50
    assert not ck.exists() and loop.drop_resume_state(tmp_path) == 0


def test_pruning_never_leaves_a_half_pruned_resumable_folder(tmp_path):
    ck = tmp_path / "checkpoints"
    for e in (1, 2, 3):
        (ck / f"epoch-{e}").mkdir(parents=True)
        (ck / f"epoch-{e}" / "state.json").write_text("{}")
        (ck / f"epoch-{e}" / "model.safetensors").write_bytes(b"w")
        (ck / f"epoch-{e}" / "optimizer.bin").write_bytes(b"o")
    pruned = loop.prune_checkpoints(tmp_path, keep=1, keep_weights=True)
    assert [p.name for p in pruned] == ["epoch-1", "epoch-2"]
    assert loop.last_checkpoint(tmp_path)[0] == 3
    assert not (ck / "epoch-2" / "state.json").exists() and (ck / "epoch-2" / "model.safetensors").exists()
    assert loop.prune_checkpoints(tmp_path, keep=1) == []  # weights-only folders are no longer states


@pytest.mark.parametrize("keep_weights", [False, True])
def test_what_a_killed_run_left_half_written_is_removed_at_the_next_start(tmp_path, keep_weights):
    """A checkpoint being written (.epoch-N.tmp), an epoch folder whose pruning was cut short (state.json gone,
    the optimizer state still there) and a temporary of final/ are removed (or, with keep_epoch_weights, reduced
    to the weights, as the pruning would have left it) when training starts again."""
    from context_cda.train import run_finetune

    out = tmp_path / "o"
    ck = out / "checkpoints"
    (ck / ".epoch-2.tmp").mkdir(parents=True)
    (ck / ".epoch-2.tmp" / "optimizer.bin").write_bytes(b"o" * 100)
    (ck / "epoch-7").mkdir()
    (ck / "epoch-7" / "model.safetensors").write_bytes(b"w")
    (ck / "epoch-7" / "optimizer.bin").write_bytes(b"o" * 100)
    (out / ".final.abc123.tmp").mkdir()
    cfg = _run_cfg(tmp_path, epochs=1, keep_epoch_weights=keep_weights)
    res = run_finetune(cfg, {"corpus": _corpus(tmp_path)}, out, "tg", "context-cda", token_budget=150,
                       evaluate=False)
    assert res["resumed_from_epoch"] is None  # nothing half-written was taken for a checkpoint
    assert not (ck / ".epoch-2.tmp").exists() and not (out / ".final.abc123.tmp").exists()
    if keep_weights:
        assert sorted(f.name for f in (ck / "epoch-7").iterdir()) == ["model.safetensors"]
    else:
        assert not (ck / "epoch-7").exists()
    assert loop.remove_partial(out, keep_weights) == []  # idempotent


def test_a_checkpoint_being_written_is_finished_before_a_sigterm_stops_training(tmp_path, monkeypatch):
    """A SIGTERM that arrives while epoch 1's checkpoint is written waits until it is complete (and pruned)."""
    import signal

    from context_cda.runtime.signals import Terminated, sigterm_raises
    from context_cda.train import run_finetune

    real = loop._save_checkpoint

    def save(acc, out, epoch, *a, **k):
        if epoch == 1:
            os.kill(os.getpid(), signal.SIGTERM)  # arrives mid-save
        return real(acc, out, epoch, *a, **k)

    monkeypatch.setattr(loop, "_save_checkpoint", save)
    out = tmp_path / "o"
    with sigterm_raises(), pytest.raises(Terminated):
        run_finetune(_run_cfg(tmp_path), {"corpus": _corpus(tmp_path)}, out, "tg", "context-cda", token_budget=150,
                     evaluate=False)
    assert (out / "checkpoints" / "epoch-1" / "state.json").is_file()
    assert not list((out / "checkpoints").glob(".epoch-*.tmp")) and not (out / "checkpoints" / "epoch-2").exists()
    assert not (out / ".ccda-lock").exists()
    monkeypatch.setattr(loop, "_save_checkpoint", real)
    res = run_finetune(_run_cfg(tmp_path), {"corpus": _corpus(tmp_path)}, out, "tg", "context-cda", token_budget=150,
                       evaluate=False)
    assert res["resumed_from_epoch"] == 1 and res["epochs"] == 3
