"""A catalogue of bad inputs, through both front doors (the stage commands `ccda <stage>` and the runner `ccda
run`): each must end with exit code 2, one line on stderr (``error: ...``) naming the file / row / key and the fix,
no traceback, and no output file written (a new run folder may hold its layout.json, nothing else).

Every case builds its own small files in a temporary folder; most fail before any model is loaded. The CLI runs
in-process (``context_cda.cli.main``), so an unexpected exception fails the case with its traceback.
"""

from __future__ import annotations

import errno
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from context_cda.cli import main

ROOT = Path(__file__).resolve().parents[2]
PARAMS = ROOT / "params.yaml"
CORPUS = ROOT / "tests" / "fixtures" / "corpus" / "tiny_corpus.txt"
STEREOSET = ROOT / "tests" / "fixtures" / "evaluate" / "stereoset_tiny.json"


@dataclass
class Case:
    id: str
    build: Callable[[Path], list[str]]  # tmp folder -> argv (files it needs written there)
    expect: str  # regex the one error line must match (file, row or key named, and the fix)


CASES: list[Case] = []


def case(id: str, expect: str):  # noqa: A002
    def deco(fn):
        CASES.append(Case(id, fn, expect))
        return fn

    return deco


def base(tmp: Path, *sets: str) -> list[str]:
    args = ["--params", str(PARAMS), "--profile", "tiny", "--run-dir", str(tmp / "run")]
    for s in sets:
        args += ["--set", s]
    return args


def run(tmp: Path, *sets: str, extra: tuple[str, ...] = ()) -> list[str]:
    """`ccda run` on the tiny profile, generation going nowhere (nothing must get that far)."""
    return ["run", *base(tmp, f"ingest.path={CORPUS}", *sets), *extra]


def text_file(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def table(path: Path, rows: dict | pd.DataFrame) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    (rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)).to_parquet(path)
    return path


def cda_rows(n: int = 3, **over) -> dict:
    rows = {"id": [f"c{i}" for i in range(n)], "original": ["He said that his mother was tired."] * n,
            "counterfactual": ["She said that her father was tired."] * n,
            "swapped_terms": [["he->she", "his->her", "mother->father"]] * n, "applied": [True] * n}
    rows.update(over)
    return rows


def good_corpus(tmp: Path) -> Path:
    return table(tmp / "corpus.parquet", {"text": ["He said that his mother was tired today."] * 6})


def not_gguf(tmp: Path) -> Path:
    return text_file(tmp / "model.gguf", "this is a text file, not a model\n")


# ------------------------------------------------------------------------------------------------ config


@case("train.k=-5 (runner)", r"train\.k: .*greater than 0.*-5")
def _(t):
    return run(t, "train.k=-5")


@case("train.k=100 (runner)", r"train\.k: .*less than 100.*100")
def _(t):
    return run(t, "train.k=100")


@case("train.k=-5 (finetune)", r"train\.k: .*greater than 0")
def _(t):
    return ["finetune", *base(t, "train.k=-5")]


@case("run.targets={} (runner)", r"run\.targets: .*at least one target")
def _(t):
    return run(t, "run.targets={}")


@case("run.targets={} (ingest)", r"run\.targets: .*at least one target")
def _(t):
    return ["ingest", *base(t, "run.targets={}")]


@case("target name ../x", r"run\.targets: .*target '\.\./x'.*folder names")
def _(t):
    return run(t, "run.targets={'../x': 'tiny:gpt2'}")


@case("target name ..", r"run\.targets: .*target '\.\.'")
def _(t):
    return run(t, "run.targets={'..': 'tiny:gpt2'}")


@case("target name a/b", r"run\.targets: .*target 'a/b'")
def _(t):
    return ["entropy", *base(t, "run.targets={'a/b': 'tiny:gpt2'}")]


@case("target with empty reference", r"run\.targets: .*empty model reference")
def _(t):
    return run(t, "run.targets={'t': ' '}")


@case("train.arms=[]", r"train\.arms: .*at least one arm")
def _(t):
    return run(t, "train.arms=[]")


@case("train.arms=[bogus]", r"train\.arms: .*unknown arm.*'bogus'")
def _(t):
    return run(t, "train.arms=[bogus]")


@case("train.arms k out of range", r"train\.arms: .*k must lie in \(0, 100\)")
def _(t):
    return run(t, "train.arms=[context-cda-k100]")


@case("train.seeds=[-1]", r"train\.seeds: .*\[0, 2\*\*32\)")
def _(t):
    return ["finetune", *base(t, "train.seeds=[-1]")]


@case("train.seeds=[]", r"train\.seeds: .*at least one seed")
def _(t):
    return run(t, "train.seeds=[]")


@case("run.seed=-1", r"run\.seed: .*greater than or equal to 0")
def _(t):
    return ["ingest", *base(t, "run.seed=-1")]


@case("filter.k=[100]", r"filter\.k: .*\[0, 100\)")
def _(t):
    return ["filter", *base(t, "filter.k=[100]")]


@case("entropy.n_samples=1", r"entropy\.n_samples: .*greater than or equal to 2")
def _(t):
    return ["entropy", *base(t, "entropy.n_samples=1")]


@case("augment.batch_size=0", r"augment\.batch_size: .*greater than or equal to 1")
def _(t):
    return ["augment", *base(t, "augment.batch_size=0")]


@case("run.device=gpu", r"run\.device: .*auto\|cpu\|mps\|cuda")
def _(t):
    return run(t, "run.device=gpu")


@case("unknown section", r"unknown section 'nope'.*Known sections")
def _(t):
    return ["ingest", *base(t, "nope.x=1")]


@case("unknown key", r"train\.nope: unknown key\. Known keys in train")
def _(t):
    return run(t, "train.nope=1")


@case("wrong type", r"train\.epochs: .*valid integer.*'abc'")
def _(t):
    return ["finetune", *base(t, "train.epochs=abc")]


@case("--set without =", r"--set 'train\.epochs': expected section\.key=value")
def _(t):
    return ["ingest", *base(t), "--set", "train.epochs"]


@case("--set without a field", r"--set 'train=3': the key must name a section and a field")
def _(t):
    return ["ingest", *base(t), "--set", "train=3"]


@case("unknown profile", r"Unknown profile 'nope'.*Known profiles")
def _(t):
    return ["ingest", "--params", str(PARAMS), "--profile", "nope"]


@case("profile is a list", r"profile\.yaml: the top level must be a mapping")
def _(t):
    p = text_file(t / "profile.yaml", "- a\n- b\n")
    return ["ingest", "--params", str(PARAMS), "--profile", str(p)]


@case("profile YAML syntax", r"bad\.yaml: line 2, column 1: not valid YAML \(expected .*\)")
def _(t):
    p = text_file(t / "bad.yaml", "run: [unclosed\n")
    return ["run", "--params", str(PARAMS), "--profile", str(p)]


@case("profile section not a mapping", r"section 'train' must be a mapping")
def _(t):
    p = text_file(t / "p.yaml", "train: 3\n")
    return ["run", "--params", str(PARAMS), "--profile", str(p)]


@case("params file missing", r"missing\.yaml: file not found")
def _(t):
    return ["ingest", "--params", str(t / "missing.yaml")]


@case("min_words > max_words", r"ingest: .*min_words \(10\) must not exceed max_words \(5\)")
def _(t):
    return ["ingest", *base(t, "ingest.min_words=10", "ingest.max_words=5")]


@case("train.warmup_ratio=1.5", r"train\.warmup_ratio: .*less than 1")
def _(t):
    return run(t, "train.warmup_ratio=1.5")


@case("train.keep_checkpoints=0", r"train\.keep_checkpoints: .*greater than or equal to 1")
def _(t):
    return run(t, "train.keep_checkpoints=0")


@case("run.max_error_fraction=2", r"run\.max_error_fraction: .*less than or equal to 1")
def _(t):
    return run(t, "run.max_error_fraction=2")


@case("validate.max_length_ratio=1", r"validate\.max_length_ratio: .*greater than 1")
def _(t):
    return ["validate", "--stage", "cda", *base(t, "validate.max_length_ratio=1")]


# ------------------------------------------------------------------------------------------------ names


@case("evaluate --name ../../x", r"--name '\.\./\.\./x': names become folder names")
def _(t):
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--name", "../../x"]


@case("evaluate --name ..", r"--name '\.\.': names become folder names")
def _(t):
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--name", ".."]


@case("evaluate --name .", r"--name '\.': names become folder names")
def _(t):
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--name", "."]


@case("evaluate --name too long", r"--name 'xxxx.*at most 128 characters")
def _(t):
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--name", "x" * 200]


@case("evaluate --arm ../x", r"--arm '\.\./x': names become folder names")
def _(t):
    return ["evaluate", *base(t), "--arm", "../x"]


@case("run --targets ../x", r"--targets: unknown target\(s\) \.\./x; configured: tiny-gpt2")
def _(t):
    return run(t, extra=("--targets", "../x"))


@case("finetune --target ../x", r"--target \.\./x: not configured \(tiny-gpt2\)")
def _(t):
    return ["finetune", *base(t), "--target", "../x"]


@case("entropy --target nope", r"--target nope: not configured \(tiny-gpt2\)")
def _(t):
    return ["entropy", *base(t), "--target", "nope"]


@case("finetune --seed=-1", r"--seed -1: training seeds must lie in \[0, 2\*\*32\)")
def _(t):
    return ["finetune", *base(t), "--input", str(good_corpus(t)), "--arm", "cda", "--seed=-1"]


@case("finetune --input with two arms", r"--input/--out need exactly one --target, --arm and --seed")
def _(t):
    return ["finetune", *base(t), "--input", str(good_corpus(t))]


# ------------------------------------------------------------------------------------------------ ingest


@case("ingest path missing", r"missing\.txt: no such file\. Check --path")
def _(t):
    return ["ingest", *base(t), "--path", str(t / "missing.txt")]


@case("ingest empty file", r"empty\.txt: the corpus is empty")
def _(t):
    return ["ingest", *base(t), "--path", str(text_file(t / "empty.txt", ""))]


@case("ingest ungendered corpus", r"ungendered\.txt: no sentence kept .*gendered words")
def _(t):
    p = text_file(t / "ungendered.txt", "The cat sat on the mat all day long.\nRain fell on the old town again.\n")
    return ["ingest", *base(t), "--path", str(p)]


@case("ingest text file named .parquet", r"corpus\.parquet: not a readable Parquet file")
def _(t):
    return ["ingest", *base(t), "--path", str(text_file(t / "corpus.parquet", "He went home.\n"))]


@case("ingest csv without text column", r"c\.csv: .*text")
def _(t):
    p = text_file(t / "c.csv", "body,n\nHe said that his mother was tired,1\n")
    return ["ingest", *base(t), "--path", str(p)]


@case("ingest int text column", r"i\.parquet: column 'text' holds int64, not text")
def _(t):
    return ["ingest", *base(t), "--path", str(table(t / "i.parquet", {"text": [1, 2, 3]}))]


@case("ingest unknown encoding", r"ingest\.encoding: .*unknown text encoding 'bogus-enc'")
def _(t):
    return ["ingest", *base(t), "--path", str(CORPUS), "--encoding", "bogus-enc"]


@case("ingest undecodable bytes", r"latin\.txt:1: bytes that are not valid utf-8 .*--encoding-errors replace")
def _(t):
    p = t / "latin.txt"
    p.write_bytes("Er sagte, seine Mutter sei m\u00fcde. He said his mother was tired.\n".encode("latin-1"))
    return ["ingest", *base(t), "--path", str(p)]


@case("ingest folder with no text files", r"folder holds no .* files")
def _(t):
    (t / "empty_dir").mkdir()
    text_file(t / "empty_dir" / "notes.docx", "x")
    return ["ingest", *base(t), "--path", str(t / "empty_dir")]


@case("ingest .gz that is not gzip", r"fake\.txt\.gz: not a gzip file")
def _(t):
    return ["ingest", *base(t), "--path", str(text_file(t / "fake.txt.gz", "He said his mother was tired.\n"))]


@case("ingest unknown corpus name", r"Unknown corpus 'nope'")
def _(t):
    return ["ingest", *base(t, "ingest.path=null"), "--corpus", "nope"]


@case("ingest jsonl of non-objects", r"l\.jsonl: (line 1|no sentence kept)")
def _(t):
    return ["ingest", *base(t), "--path", str(text_file(t / "l.jsonl", "[1, 2]\n[3]\n"))]


# ------------------------------------------------------------------------------------------------ cda


@case("lexicon JSON object", r"lex\.json: a JSON object .*expected a JSON list of \[male, female\] pairs")
def _(t):
    p = text_file(t / "lex.json", json.dumps({"he": "she", "his": "her"}))
    return ["cda", *base(t), "--lexicon", str(p)]


@case("lexicon file missing", r"nolex\.json")
def _(t):
    return ["cda", *base(t), "--lexicon", str(t / "nolex.json")]


@case("lexicon TSV bad line", r"lex\.tsv:2: expected 'male<TAB>female'")
def _(t):
    p = text_file(t / "lex.tsv", "he\tshe\nking\tqueen\textra\n")
    return ["cda", *base(t), "--lexicon", str(p)]


@case("cda input without text column", r"s\.parquet: missing column\(s\) text")
def _(t):
    return ["cda", *base(t), "--input", str(table(t / "s.parquet", {"id": ["a"], "body": ["He went."]}))]


@case("cda input int text column", r"s\.parquet: column 'text' must hold text .* row 0 holds 7")
def _(t):
    return ["cda", *base(t), "--input", str(table(t / "s.parquet", {"id": ["a", "b"], "text": [7, 8]}))]


@case("cda input empty table", r"s\.parquet: the table has no rows")
def _(t):
    df = pd.DataFrame({"id": pd.Series([], dtype=str), "text": pd.Series([], dtype=str)})
    return ["cda", *base(t), "--input", str(table(t / "s.parquet", df))]


@case("cda names file a JSON object", r"names\.json: a JSON object .*expected a JSON list of")
def _(t):
    names = text_file(t / "names.json", json.dumps({"John": "Mary"}))
    src = table(t / "s.parquet", {"id": ["a"], "text": ["He said that John was tired."]})
    return ["cda", *base(t), "--input", str(src), "--swap-names", "--names-path", str(names)]


@case("cda input text file named .parquet", r"s\.parquet: not a Parquet file")
def _(t):
    return ["cda", *base(t), "--input", str(text_file(t / "s.parquet", "id,text\n"))]


# ------------------------------------------------------------------------------------------------ validate


@case("validate unknown boundary", r"--stage 'bogus': boundaries are cda, augment, entropy")
def _(t):
    return ["validate", "--stage", "bogus", *base(t)]


@case("validate input missing", r"counterfactuals\.parquet: not found\. Run the stage that produces it first")
def _(t):
    return ["validate", "--stage", "cda", *base(t)]


@case("validate int counterfactual column", r"v\.parquet: column 'counterfactual' must hold text .* row 0 holds 5")
def _(t):
    return ["validate", "--stage", "cda", *base(t), "--input", str(table(t / "v.parquet",
                                                                         cda_rows(2, counterfactual=[5, 6])))]


@case("validate empty table", r"v\.parquet: the table has no rows")
def _(t):
    df = pd.DataFrame(cda_rows(1)).iloc[:0]
    return ["validate", "--stage", "cda", *base(t), "--input", str(table(t / "v.parquet", df))]


@case("validate augment missing column", r"a\.parquet: missing column\(s\) .*augmented")
def _(t):
    return ["validate", "--stage", "augment", *base(t), "--input",
            str(table(t / "a.parquet", {"id": ["a"], "counterfactual": ["She went."]}))]


# ------------------------------------------------------------------------------------------------ augment


def augment(t: Path, src: Path, *sets: str) -> list[str]:
    return ["augment", *base(t, "augment.backend=openai", "augment.model=m",
                         "augment.openai.base_url=http://127.0.0.1:9/v1", "augment.openai.max_attempts=1", *sets),
            "--input", str(src), "--no-progress"]


@case("augment int counterfactual column", r"c\.parquet: column 'counterfactual' must hold text .* row 0 holds 1")
def _(t):
    return augment(t, table(t / "c.parquet", cda_rows(2, counterfactual=[1, 2])))


@case("augment missing swapped_terms", r"c\.parquet: missing column\(s\) swapped_terms")
def _(t):
    rows = cda_rows(2)
    del rows["swapped_terms"]
    return augment(t, table(t / "c.parquet", rows))


@case("augment swapped_terms of numbers", r"c\.parquet: column 'swapped_terms' must hold strings or lists")
def _(t):
    return augment(t, table(t / "c.parquet", cda_rows(2, swapped_terms=[3, 4])))


@case("augment empty input", r"c\.parquet: the table has no rows\. Nothing to augment")
def _(t):
    return augment(t, table(t / "c.parquet", pd.DataFrame(cda_rows(1)).iloc[:0]))


@case("augment text file named .parquet", r"c\.parquet: not a Parquet file")
def _(t):
    return augment(t, text_file(t / "c.parquet", "not a table"))


@case("augment duplicate ids", r"c\.parquet: duplicate id 'c0'")
def _(t):
    return augment(t, table(t / "c.parquet", cda_rows(2, id=["c0", "c0"])))


@case("augment server down", r"Cannot reach the OpenAI-compatible server at http://127\.0\.0\.1:9/v1")
def _(t):
    return augment(t, table(t / "c.parquet", cda_rows(2)))


@case("augment base_url without scheme", r"augment\.openai\.base_url: .*http:// or https:// URL .*'localhost:8000/v1'")
def _(t):
    return augment(t, table(t / "c.parquet", cda_rows(2)), "augment.openai.base_url=localhost:8000/v1")


@case("augment hf model folder missing", r"augment\.model|nope-model: no such folder")
def _(t):
    return ["augment", *base(t, "augment.backend=hf", "augment.model=./nope-model"),
            "--input", str(table(t / "c.parquet", cda_rows(2))), "--no-progress"]


@case("augment review input missing", r"--input .*out\.jsonl: no such file")
def _(t):
    return ["augment", "review", "--params", str(PARAMS), "--input", str(t / "out.jsonl")]


@case("augment review jsonl syntax", r"out\.jsonl: line 2: not valid JSON")
def _(t):
    p = text_file(t / "out.jsonl", '{"counterfactual": "She went.", "output": "She went home."}\n{oops\n')
    return ["augment", "review", "--params", str(PARAMS), "--input", str(p)]


# ------------------------------------------------------------------------------------------------ entropy


def sample(t: Path, src: Path, *sets: str) -> list[str]:
    return ["sample", *base(t, "augment.backend=openai", "augment.model=m",
                        "augment.openai.base_url=http://127.0.0.1:9/v1", *sets), "--input", str(src)]


def entropy(t: Path, *sets: str, samples: dict | None = None) -> list[str]:
    """`ccda entropy` on a sample step's folder holding ``samples`` (default: one item's two samples)."""
    rows = samples if samples is not None else {"id": ["a", "a"], "text": ["She went home."] * 2,
                                               "sample_idx": [0, 1], "sample": ["She left.", "She went."],
                                               "cluster": [0, 1]}
    table(t / "s" / "samples.parquet", rows)
    return ["entropy", *base(t, *sets), "--samples", str(t / "s")]


@case("sample input without id", r"a\.parquet: the sample step needs columns id and augmented")
def _(t):
    return sample(t, table(t / "a.parquet", {"augmented": ["She went home."]}))


@case("sample empty input", r"a\.parquet: the table has no rows\. Nothing to sample")
def _(t):
    return sample(t, table(t / "a.parquet", pd.DataFrame({"id": pd.Series([], dtype=str),
                                                          "augmented": pd.Series([], dtype=str)})))


@case("sample int augmented column", r"a\.parquet: column 'augmented' must hold text .* row 0 holds 3")
def _(t):
    return sample(t, table(t / "a.parquet", {"id": ["a", "b"], "augmented": [3, 4]}))


@case("sample judge model missing", r"entropy\.judge_model|nope-judge: no such folder")
def _(t):
    return sample(t, table(t / "a.parquet", {"id": ["a"], "augmented": ["She went home."]}),
                  "entropy.judge=nli", "entropy.judge_model=./nope-judge")


@case("sample run.device=cuda without CUDA", r"run\.device=cuda: .*(no CUDA|CUDA support).*run\.device=auto or cpu")
def _(t):
    return sample(t, table(t / "a.parquet", {"id": ["a"], "augmented": ["She went home."]}), "run.device=cuda",
                  "entropy.judge=nli", "entropy.judge_model=tiny:nli")


@case("entropy without samples", r"s: no samples\.parquet; run the sample step first")
def _(t):
    (t / "s").mkdir(parents=True)
    return ["entropy", *base(t), "--samples", str(t / "s")]


@case("entropy samples table without clusters", r"samples\.parquet: missing column\(s\) cluster: not a sample step")
def _(t):
    return entropy(t, samples={"id": ["a"], "text": ["She went home."], "sample_idx": [0], "sample": ["She left."]})


@case("entropy target not GGUF", r"model\.gguf: not a GGUF file .*starts with b'this'")
def _(t):
    return entropy(t, f"run.targets={{'t': '{not_gguf(t)}'}}")


@case("entropy run.device=cuda without CUDA", r"run\.device=cuda: .*(no CUDA|CUDA support).*run\.device=auto or cpu")
def _(t):
    return entropy(t, "run.device=cuda")


# ------------------------------------------------------------------------------------------------ filter


def scores(t: Path, df: dict) -> None:
    table(t / "run" / "validate" / "entropy" / "tiny-gpt2" / "valid.parquet", df)


@case("filter --k 100", r"filter\.k: .*\[0, 100\)")
def _(t):
    return ["filter", *base(t), "--k", "100"]


@case("filter --k abc", r"--k 'abc': expected a percentage")
def _(t):
    return ["filter", *base(t), "--k", "abc"]


@case("filter scores without se", r"valid\.parquet: missing column\(s\) se")
def _(t):
    scores(t, {"id": ["a"], "text": ["She went."]})
    return ["filter", *base(t)]


@case("filter se as strings", r"valid\.parquet: column 'se' must hold numbers, but row 0 holds 'high' .*pd\.to_numeric")
def _(t):
    scores(t, {"id": ["a", "b"], "text": ["She went.", "He went."], "se": ["high", "low"]})
    return ["filter", *base(t)]


@case("filter scores missing", r"valid\.parquet: not found")
def _(t):
    return ["filter", *base(t)]


# ------------------------------------------------------------------------------------------------ finetune


def finetune(t: Path, *sets: str, corpus: Path | None = None) -> list[str]:
    return ["finetune", *base(t, *sets), "--input", str(corpus or good_corpus(t)), "--arm", "cda", "--no-eval"]


@case("finetune target .gguf not GGUF", r"model\.gguf: not a GGUF file .*starts with b'this'")
def _(t):
    return finetune(t, f"run.targets={{'tiny-gpt2': '{not_gguf(t)}'}}")


@case("finetune target folder missing", r"nope-model: no such folder or file")
def _(t):
    return finetune(t, "run.targets={'tiny-gpt2': './nope-model'}")


@case("finetune target folder without config.json", r"folder has no config\.json")
def _(t):
    (t / "notamodel").mkdir()
    return finetune(t, f"run.targets={{'tiny-gpt2': '{t / 'notamodel'}'}}")


@case("finetune target package missing", r"package:no-such-pkg: the Python package 'no-such-pkg' is not installed")
def _(t):
    return finetune(t, "run.targets={'tiny-gpt2': 'package:no-such-pkg'}")


@case("finetune run.device=cuda without CUDA", r"run\.device=cuda: .*(no CUDA|CUDA support)")
def _(t):
    return finetune(t, "run.device=cuda")


@case("finetune corpus empty", r"corpus\.parquet: no training text \(0 non-empty rows\)")
def _(t):
    return finetune(t, corpus=table(t / "corpus.parquet", {"text": pd.Series([], dtype=str)}))


@case("finetune corpus without text", r"corpus\.parquet: needs a 'text' .* column")
def _(t):
    return finetune(t, corpus=table(t / "corpus.parquet", {"body": ["He went."]}))


@case("finetune corpus int text", r"corpus\.parquet: column 'text' must hold text .* row 0 holds 11")
def _(t):
    return finetune(t, corpus=table(t / "corpus.parquet", {"text": [11, 12]}))


@case("finetune corpus below train.min_rows", r"has 6 rows, fewer than train\.min_rows=50")
def _(t):
    return finetune(t, "train.min_rows=50")


@case("finetune corpus text file named .parquet", r"corpus\.parquet: not a Parquet file")
def _(t):
    return finetune(t, corpus=text_file(t / "corpus.parquet", "text\nHe went.\n"))


@case("finetune arm inputs missing", r"finetune tiny-gpt2/cda: input cda = .*valid\.parquet not found")
def _(t):
    return ["finetune", *base(t), "--arm", "cda", "--no-eval"]


# ------------------------------------------------------------------------------------------------ evaluate


@case("evaluate stereoset path missing", r"nope\.json")
def _(t):
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--benchmarks", "stereoset",
            "--stereoset-path", str(t / "nope.json")]


@case("evaluate stereoset not JSON", r"bad\.json: .*(JSON|json)")
def _(t):
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--benchmarks", "stereoset",
            "--stereoset-path", str(text_file(t / "bad.json", "{not json"))]


@case("evaluate crows csv without columns", r"crows\.csv: .*(sent_more|column)")
def _(t):
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--benchmarks", "crows",
            "--crows-path", str(text_file(t / "crows.csv", "a,b\n1,2\n"))]


@case("evaluate unknown benchmark", r"(unknown benchmark|benchmark).*bogus")
def _(t):
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--benchmarks", "bogus"]


@case("evaluate model folder missing", r"nope-model: no such folder or file")
def _(t):
    return ["evaluate", *base(t), "--model", "./nope-model", "--benchmarks", "stereoset",
            "--stereoset-path", str(STEREOSET)]


@case("evaluate model not GGUF", r"model\.gguf: not a GGUF file")
def _(t):
    return ["evaluate", *base(t), "--model", str(not_gguf(t)), "--benchmarks", "stereoset",
            "--stereoset-path", str(STEREOSET)]


# ------------------------------------------------------------------------------------------------ register, report


@case("register before fine-tuning", r"register tiny-gpt2/cda: .*final is not a save_pretrained folder; run finetune")
def _(t):
    return ["register", *base(t)]


@case("report of an empty run folder", r"run/finetune: no fine-tuning step with a metrics\.csv .*run `ccda finetune`")
def _(t):
    return ["report", str(t / "run"), "--params", str(PARAMS), "--profile", "tiny", "--no-tracking"]


# ------------------------------------------------------------------------------------------------ run folders


@case("run folder under a file (ingest)", r"cannot write here \(a part of this path is a file")
def _(t):
    blocker = text_file(t / "blocker", "x")
    return ["ingest", *base(t), "--path", str(CORPUS), "--run-dir", str(blocker / "run")]


@case("run folder under a file (runner)", r"cannot write here \(a part of this path is a file")
def _(t):
    blocker = text_file(t / "blocker", "x")
    return [*run(t), "--run-dir", str(blocker / "run")]


@case("run folder is a file", r"run: cannot write here \((a file of that name|Not a directory)|run/layout\.json")
def _(t):
    text_file(t / "run", "x")
    return ["ingest", *base(t), "--path", str(CORPUS)]


@case("run folder of layout 1", r"uses run layout 1, and this context-cda reads layout 3\. .*start a new run folder")
def _(t):
    (t / "run" / "ingest").mkdir(parents=True)
    return run(t)


@case("run folder of layout 2", r"uses run layout 2, .* migrate it in place with `ccda migrate --run-dir .*/run`")
def _(t):
    text_file(t / "run" / "layout.json", '{"layout_version": 2}')
    return run(t)


@case("arms' k not written by the filter", r"train\.arms context-cda-k40 \(k = 40\) would train on a corpus that "
      r"filter\.k = \[30\] does not write; add it to filter\.k")
def _(t):
    return run(t, "train.arms=[cda, context-cda-k40]")


@case("layout.json unreadable", r"layout\.json: unreadable layout record")
def _(t):
    text_file(t / "run" / "layout.json", "{oops")
    return ["cda", *base(t)]


# ------------------------------------------------------------------------------------------------ the runner


@case("runner --until bogus", r"unknown stage 'bogus'; stages: ingest")
def _(t):
    return run(t, extra=("--until", "bogus"))


@case("runner --only bogus", r"unknown stage 'nope'")
def _(t):
    return run(t, extra=("--only", "nope"))


@case("runner ingest path missing", r"pre-flight, nothing was run: ingest\.path: .*missing\.txt does not exist")
def _(t):
    return ["run", *base(t, f"ingest.path={t / 'missing.txt'}")]


@case("runner misspelt benchmark", r"pre-flight, nothing was run: evaluate\.benchmarks: unknown benchmark 'crow' "
      r"\(did you mean 'crows'\?\)")
def _(t):
    return run(t, "evaluate.benchmarks=[stereoset,crow]")


@case("runner benchmark file missing", r"pre-flight, nothing was run: evaluate\.crows_path: .*nope\.csv does not "
      r"exist \(needed by crows\)")
def _(t):
    return run(t, f"evaluate.crows_path={t / 'nope.csv'}")


@case("evaluate misspelt --benchmarks", r"--benchmarks: unknown benchmark 'crow' \(did you mean 'crows'\?\)")
def _(t):
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--benchmarks", "stereoset,crow"]


@case("runner ungendered corpus", r"u\.txt: no sentence kept")
def _(t):
    p = text_file(t / "u.txt", "The cat sat on the mat all day long.\nRain fell on the old town again.\n")
    return ["run", *base(t, f"ingest.path={p}")]


@case("runner lexicon JSON object", r"lex\.json: a JSON object .*expected a JSON list of \[male, female\] pairs")
def _(t):
    return run(t, f"lexicon.source={text_file(t / 'lex.json', json.dumps({'he': 'she'}))}")


@case("runner target not GGUF", r"run\.targets\.tiny-gpt2: .*model\.gguf: not a GGUF file")
def _(t):
    return run(t, f"run.targets={{'tiny-gpt2': '{not_gguf(t)}'}}")


@case("runner target folder missing", r"run\.targets\.tiny-gpt2: \./nope: no such folder")
def _(t):
    return run(t, "run.targets={'tiny-gpt2': './nope'}")


@case("runner judge model missing", r"entropy\.judge_model: \./nope-judge: no such folder")
def _(t):
    return run(t, "entropy.judge_model=./nope-judge")


@case("runner generator package missing", r"augment\.model: package:nope-pkg: .*not installed")
def _(t):
    return run(t, "augment.backend=hf", "augment.model=package:nope-pkg")


@case("runner run.device=cuda without CUDA", r"run\.device=cuda: .*(no CUDA|CUDA support)")
def _(t):
    return run(t, "run.device=cuda")


@case("runner text file named .parquet", r"c\.parquet: not a readable Parquet file")
def _(t):
    return ["run", *base(t, f"ingest.path={text_file(t / 'c.parquet', 'He went home.')}")]


@case("runner int text column", r"i\.parquet: column 'text' holds int64, not text")
def _(t):
    return ["run", *base(t, f"ingest.path={table(t / 'i.parquet', {'text': [1, 2]})}")]


# ------------------------------------------------------------------------------------------------ the test


NOISE = re.compile(r"^\d\d:\d\d:\d\d |\[\d\d:\d\d[<,]|\d+ lines \[")  # log lines and progress bars


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()} if folder.is_dir() else set()


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_clear_line(c: Case, tmp_path, capsys, monkeypatch):
    if "cuda" in c.id:
        torch = pytest.importorskip("torch")
        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("CCDA_PARAMS", raising=False)
    argv = c.build(tmp_path)
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip() and not NOISE.search(ln)]
    assert code == 2, f"exit {code}, stderr:\n{err}"
    assert len(lines) == 1 and lines[0].startswith("error: "), f"not one error line:\n{err}"
    assert "Traceback" not in err
    assert re.search(c.expect, lines[0]), f"{lines[0]!r} does not match {c.expect!r}"
    written = _files(tmp_path / "run") - {"layout.json", "validate/entropy/tiny-gpt2/valid.parquet"}
    assert not written, f"written although the input was refused: {sorted(written)}"


def test_read_only_run_folder_is_one_clear_line(tmp_path, capsys, monkeypatch):
    """A run folder on a read-only file system (simulated: every write below it fails with EROFS)."""
    import os as _os

    ro = tmp_path / "ro"
    real_open, real_mkdir = _os.open, Path.mkdir

    def deny(path):
        return str(path).startswith(str(ro))

    def fake_open(path, flags, *a, **k):
        if deny(path) and flags & (_os.O_WRONLY | _os.O_RDWR | _os.O_CREAT):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *a, **k)

    def fake_mkdir(self, *a, **k):
        if deny(self):
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real_mkdir(self, *a, **k)

    monkeypatch.setattr(_os, "open", fake_open)
    monkeypatch.setattr(Path, "mkdir", fake_mkdir)
    monkeypatch.chdir(ROOT)
    for argv in (["ingest", *base(tmp_path), "--path", str(CORPUS), "--run-dir", str(ro / "run")],
                 [*run(tmp_path), "--run-dir", str(ro / "run")]):
        capsys.readouterr()
        code = main(argv)
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1, err
        assert re.search(r"ro/run: cannot write here \(Read-only file system\)\. Choose a writable folder", err), err


def test_the_catalogue_is_large_and_covers_both_doors(tmp_path):
    assert len(CASES) >= 60 and len({c.id for c in CASES}) == len(CASES)
    doors = []
    for i, c in enumerate(CASES):
        (tmp_path / str(i)).mkdir()
        doors.append(c.build(tmp_path / str(i))[0])
    assert doors.count("run") >= 20  # the runner
    assert set(doors) >= {"ingest", "cda", "validate", "augment", "sample", "entropy", "filter", "finetune",
                          "evaluate", "register", "report"}  # every stage command
