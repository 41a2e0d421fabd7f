"""Artifact types passed between the pipeline's components.

KFP only accepts the ``system.*`` schema titles on a cluster, so each type below compiles to its KFP base type
(``system.Dataset``, ``system.Model``, ``system.Artifact``); the subclasses name what a step produces and consumes
in the component signatures. Every artifact of ours is a *folder*: the stage's ``out_dir`` with its tables and
``manifest.json`` (see ``docs/architecture.md``, "Run directory").

The components import this module inside their containers (``from components.artifacts import Corpus``), so the
project images ship the ``components`` package on ``PYTHONPATH`` beside ``context_cda``.
"""

from __future__ import annotations

from kfp import dsl


class Corpus(dsl.Dataset):
    """A stage folder holding one text table as Parquet (sentences, counterfactuals, augmented, validated)."""


class Samples(dsl.Dataset):
    """``sample/`` (or one generation part of it): the M rephrasings per item and their entailment clusters."""


class ScoredCorpus(dsl.Dataset):
    """``entropy/<target>/``: the semantic entropy per item and the per-sample audit table."""


class FilteredCorpora(dsl.Dataset):
    """``filter/<target>/``: one ``k<k>/corpus.parquet`` per k (or threshold) and ``summary.json``."""


class Checkpoint(dsl.Model):
    """``finetune/<target>/<arm>/``: ``final/`` (save_pretrained), ``metrics.csv`` (and ``checkpoints/epoch-N`` while
    unfinished, or with ``train.keep_resume_state``)."""


class Budget(dsl.Artifact):
    """``budget/<target>/<arm>/``: the arm's token budget (``budget.json``), its budget group's smallest corpus."""


class Projection(dsl.Model):
    """``debias/<target>/<arm>/``: a projection arm's matrix (safetensors), the sentences it was learnt from."""


class Evaluation(dsl.Dataset):
    """``evaluate/<target>/<arm|vanilla>/``: per-item predictions and the aggregate JSON of every benchmark."""


class Registration(dsl.Artifact):
    """``register/<target>/``: what was registered in MLflow and the promotion decision."""


class RunSummary(dsl.Artifact):
    """One target's slice of a run directory for the report: finetune metrics, registration records and the
    evaluation aggregates (arms and vanilla)."""


class Report(dsl.Artifact):
    """``report/``: report.md, report.html and plots."""


class RunStatus(dsl.Artifact):
    """The exit handler's record of how the run ended (state, failed task, error)."""
