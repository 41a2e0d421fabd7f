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
    env: dict[str, str] | None = None  # environment variables the case sets


CASES: list[Case] = []


def case(id: str, expect: str, env: dict[str, str] | None = None):  # noqa: A002
    def deco(fn):
        CASES.append(Case(id, fn, expect, env))
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


# ------------------------------------------------------------------------------------------------ attributes


def winobias_folder(t: Path, files: dict[str, str]) -> Path:
    """A WinoBias-like folder: the two occupation lists and ``files`` (name -> text)."""
    folder = t / "wb"
    text_file(folder / "male_occupations.txt", "developer\n")
    text_file(folder / "female_occupations.txt", "designer\n")
    for name, text in files.items():
        text_file(folder / name, text)
    return folder


def race_sentences(t: Path) -> Path:
    return table(t / "s.parquet", {"id": ["a"], "text": ["The Black community met the Asian mayor."]})


@case("run.attribute=age", r"run\.attribute: .*'gender', 'race' or 'religion'")
def _(t):
    return run(t, "run.attribute=age")


@case("attribute without a lexicon (cda)", r"words\.json: no 'race' word lists .*the attribute has no lexicon")
def _(t):
    words = text_file(t / "words.json", json.dumps({"gender": [["he", "she"]]}))
    return ["cda", *base(t, "run.attribute=race"), "--lexicon", str(words), "--input", str(race_sentences(t))]


@case("attribute without a lexicon (runner)", r"words\.json: no 'religion' word lists")
def _(t):
    words = text_file(t / "words.json", json.dumps({"race": [["black", "white"]]}))
    # the runner cases judge bias type all: the tiny fixtures hold no race or religion items, which the
    # pre-flight would report first
    return run(t, "run.attribute=religion", f"lexicon.source={words}", "evaluate.bias_type=all")


@case("lexicon groups overlap (cda)", r"'church' is listed for group 'christian' .* and for group 'muslim' "
      r".*groups of religion overlap")
def _(t):
    words = text_file(t / "groups.json", json.dumps({"religion": [["jewish", "christian", "muslim"],
                                                                   ["synagogue", "church", "mosque"],
                                                                   ["temple", "chapel", "church"]]}))
    return ["cda", *base(t, "run.attribute=religion"), "--lexicon", str(words), "--input", str(race_sentences(t))]


@case("lexicon groups overlap (runner)", r"'white' is listed for group 'white' .* and for group 'asian'")
def _(t):
    return run(t, "run.attribute=race", "lexicon.extra_groups=[[mixed, biracial, white, latino]]",
               "evaluate.bias_type=all")


@case("lexicon.extra_groups row of the wrong length", r"lexicon\.extra_groups\[0\]: a race row needs one word per "
      r"group \(4")
def _(t):
    return run(t, "run.attribute=race", "lexicon.extra_groups=[[a, b]]", "evaluate.bias_type=all")


@case("gender list for race", r"lexicon\.source='zhao2018' is a gender list; run\.attribute=race reads default")
def _(t):
    return ["cda", *base(t, "run.attribute=race", "lexicon.source=zhao2018"), "--input", str(race_sentences(t))]


@case("neutral arm for religion", r"context-neutral: a neutral rewrite replaces gendered words, so it needs "
      r"run\.attribute=gender")
def _(t):
    return run(t, "run.attribute=religion", "train.arms=[cda, context-neutral]", "evaluate.bias_type=all")


@case("cda --mode neutral for race", r"cda\.mode=neutral: a neutral rewrite replaces gendered words")
def _(t):
    return ["cda", *base(t, "run.attribute=race"), "--mode", "neutral", "--input", str(race_sentences(t))]


@case("bias-bench mapping for gender", r"cda\.mapping=bias-bench maps n-ary groups")
def _(t):
    return run(t, "cda.mapping=bias-bench")


@case("evaluate winogender file of the wrong shape", r"all_sentences\.tsv:2: expected "
      r"'OCCUPATION\.PARTICIPANT\.ANSWER\.GENDER\.txt")
def _(t):
    folder = t / "wg"
    text_file(folder / "templates.tsv", "occupation(0)\tother-participant(1)\tanswer\tsentence\n"
              "nurse\tpatient\t0\tThe $OCCUPATION said $NOM_PRONOUN was late.\n")
    text_file(folder / "occupations-stats.tsv", "occupation\tbergsma_pct_female\tbls_pct_female\nnurse\t80\t90\n")
    text_file(folder / "all_sentences.tsv", "sentid\tsentence\nnurse-0-male\tThe nurse said he was late.\n")
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--benchmarks", "winogender", "--winogender-path",
            str(folder)]


@case("evaluate winogender CSV instead of TSV", r"templates\.tsv:1: expected a tab-separated header")
def _(t):
    folder = t / "wg"
    text_file(folder / "templates.tsv", "occupation,answer\n")
    text_file(folder / "occupations-stats.tsv", "occupation,bls\n")
    text_file(folder / "all_sentences.tsv", "sentid,sentence\n")
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--benchmarks", "winogender", "--winogender-path",
            str(folder)]


@case("evaluate winobias file of the wrong shape", r"pro_stereotyped_type1\.txt\.test:1: expected 'N sentence' "
      r"with a bracketed mention")
def _(t):
    folder = winobias_folder(t, {f"{k}_stereotyped_type{n}.txt.test": "The developer argued with the designer.\n"
                                 for k in ("pro", "anti") for n in (1, 2)})
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--benchmarks", "winobias", "--winobias-path", str(folder)]


@case("evaluate winobias split missing", r"anti_stereotyped_type1\.txt\.dev: WinoBias file not found "
      r"\(evaluate\.winobias\.split=dev")
def _(t):
    folder = winobias_folder(t, {"pro_stereotyped_type1.txt.dev": "1 [The developer] argued with the designer "
                                 "because [he] did not like the design.\n"})
    return ["evaluate", *base(t, "evaluate.winobias.split=dev"), "--model", "tiny:gpt2", "--benchmarks", "winobias",
            "--winobias-path", str(folder)]


# ------------------------------------------------------------------------------------------------ validate


@case("validate unknown boundary", r"--stage 'bogus': boundaries are cda, augment, neutral, entropy")
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
    from context_cda.layout import write_marker

    write_marker(t / "run")  # a run folder that has not fine-tuned yet (a folder that is no run: below)
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
      r"exist \(needed by crows, decontaminate\)")
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


# ------------------------------------------------------------------------------------------------ baseline arms


@case("self-debias on a seq2seq target (runner)",
      r"arm self-debias on target t5: self-debias is defined for masked and causal LMs.*seq2seq.*Drop self-debias")
def _(t):
    return run(t, "run.targets={t5: 'tiny:t5'}", "train.arms=[cda,self-debias]")


@case("inlp on a seq2seq target (runner)", r"arm inlp on target t5: .*seq2seq model \(its projection acts on the last")
def _(t):
    return run(t, "run.targets={t5: 'tiny:t5'}", "train.arms=[cda,inlp]")


@case("self-debias on a seq2seq target (evaluate)", r"arm self-debias on target t5: .*seq2seq")
def _(t):
    return ["evaluate", *base(t, "run.targets={t5: 'tiny:t5'}", "train.arms=[cda,self-debias]"), "--target", "t5",
            "--arm", "self-debias"]


@case("self-debias on a seq2seq model (evaluate --model)", r"arm self-debias on target .*seq2seq")
def _(t):
    return ["evaluate", *base(t), "--model", "tiny:t5", "--arm", "self-debias"]


def _ingest_folder(t: Path, male: int, female: int, neutral: int) -> Path:
    folder = t / "ingest-elsewhere"
    texts = ([f"Yesterday he said that the old car {i} was fine" for i in range(male)]
             + [f"Yesterday she said that the old car {i} was fine" for i in range(female)])
    table(folder / "sentences.parquet", {"id": [f"s{i}" for i in range(len(texts))], "text": texts})
    table(folder / "rejected.parquet", {"id": [f"n{i}" for i in range(neutral)],
                                        "text": [f"The old car {i} was fine on that day" for i in range(neutral)],
                                        "reason": ["no-gender-term"] * neutral})
    return folder


@case("inlp with too few female sentences (debias)",
      r"debias inlp on target tiny-gpt2: .*ingest-elsewhere gives 12 male, 3 female, 12 neutral sentences, fewer than "
      r"baselines\.inlp\.min_per_class=10 in female.*larger corpus")
def _(t):
    return ["debias", *base(t, "train.arms=[cda,inlp]"), "--sentences", str(_ingest_folder(t, 12, 3, 12))]


@case("inlp with no neutral sentences (debias)", r"gives 12 male, 12 female, 0 neutral sentences.*in neutral")
def _(t):
    return ["debias", *base(t, "train.arms=[cda,inlp]"), "--sentences", str(_ingest_folder(t, 12, 12, 0))]


@case("sentence-debias with too few pairs (debias)",
      r"debias sentence-debias on target tiny-gpt2: .*cda\.parquet gives 3 counterfactual pairs, fewer than "
      r"baselines\.sentence_debias\.min_pairs=10")
def _(t):
    return ["debias", *base(t, "train.arms=[cda,sentence-debias]"), "--cda", str(table(t / "cda.parquet", cda_rows(3)))]


@case("debias of an arm that learns nothing", r"--arm self-debias: a scoring arm is not run by this command; use "
      r"ccda evaluate --arm self-debias")
def _(t):
    return ["debias", *base(t, "train.arms=[cda,self-debias]"), "--arm", "self-debias"]


@case("finetune of a projection arm", r"--arm inlp: a projection arm is not run by this command; use ccda debias")
def _(t):
    return ["finetune", *base(t, "train.arms=[cda,inlp]"), "--arm", "inlp"]


@case("projection of another width (evaluate --artifact)",
      r"evaluate inlp on tiny-gpt2: the projection .*wide\.safetensors is for 48-dimensional hidden states, and "
      r"this model's are 32-dimensional\. Learn it for this model")
def _(t):
    import torch
    from safetensors.torch import save_file

    t.mkdir(parents=True, exist_ok=True)
    save_file({"projection": torch.diag(torch.tensor([0.0] + [1.0] * 47))}, str(t / "wide.safetensors"))
    return ["evaluate", *base(t, "train.arms=[cda,inlp]", f"evaluate.stereoset_path={STEREOSET}"), "--target",
            "tiny-gpt2", "--arm", "inlp", "--artifact", str(t / "wide.safetensors"), "--benchmarks", "stereoset"]


@case("projection file that is not safetensors", r"junk\.safetensors: not a safetensors projection file")
def _(t):
    return ["evaluate", *base(t, "train.arms=[cda,inlp]"), "--target", "tiny-gpt2", "--arm", "inlp", "--artifact",
            str(text_file(t / "junk.safetensors", "not tensors")), "--benchmarks", "stereoset"]


@case("self-debias with a --seed", r"evaluate --arm self-debias --seed 3: self-debias is applied to the vanilla model")
def _(t):
    return ["evaluate", *base(t, "train.arms=[cda,self-debias]"), "--arm", "self-debias", "--seed", "3"]


@case("unknown arm in train.arms (runner)", r"train\.arms: .*unknown arm\(s\) 'nlp'.*inlp, sentence-debias")
def _(t):
    return run(t, "train.arms=[cda,nlp]")


@case("published checkpoint named like an arm", r"baselines\.published: .*'inlp' has the name of an arm")
def _(t):
    return run(t, "baselines.published={tiny-gpt2: {inlp: some/model}}")


@case("published list of an unknown target", r"baselines\.published names target\(s\) bert that run\.targets does not")
def _(t):
    return run(t, "baselines.published={bert: {mabel: princeton-nlp/mabel-bert-base-uncased}}")


@case("baselines.targets of an unknown target", r"baselines\.targets names target\(s\) gpt2 that run\.targets")
def _(t):
    return run(t, "baselines.targets=[gpt2]")


# ------------------------------------------------------------------------------------------------ text encodings


def utf16(path: Path, text: str) -> Path:
    """``text`` saved as UTF-16 (with its byte-order mark), as Windows editors offer to."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-16"))
    return path


def raw(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


GENDERED = "He said that his mother was tired after work today.\n"


@case("ingest UTF-16 text file", r"u16\.txt: a UTF-16 text file .*save it as UTF-8")
def _(t):
    return ["ingest", *base(t), "--path", str(utf16(t / "u16.txt", GENDERED * 3))]


@case("ingest UTF-8 BOM under --encoding latin-1", r"bom\.txt: starts with a UTF-8 byte-order mark, but the encoding "
      r"is latin-1; pass --encoding utf-8")
def _(t):
    return ["ingest", *base(t), "--path", str(raw(t / "bom.txt", b"\xef\xbb\xbf" + GENDERED.encode())),
            "--encoding", "latin-1"]


@case("ingest truncated .txt.gz", r"cut\.txt\.gz: truncated or damaged gzip file after line \d+ .*gzip -t")
def _(t):
    import gzip

    data = gzip.compress((GENDERED * 400).encode())
    return ["ingest", *base(t), "--path", str(raw(t / "cut.txt.gz", data[: len(data) // 2]))]


@case("runner truncated .jsonl.gz", r"cut\.jsonl\.gz: truncated or damaged gzip file")
def _(t):
    import gzip

    data = gzip.compress((json.dumps({"text": GENDERED.strip()}) + "\n").encode() * 400)
    return ["run", *base(t, f"ingest.path={raw(t / 'cut.jsonl.gz', data[: len(data) - 20])}")]


@case("ingest CSV with bytes that are not UTF-8", r"c\.csv:2: bytes that are not valid utf-8 .*--encoding-errors "
      r"replace")
def _(t):
    return ["ingest", *base(t), "--path", str(raw(t / "c.csv", b"text\nHe said his m\xf6ther was tired today.\n"))]


@case("lexicon TSV with bytes that are not UTF-8", r"lex\.tsv:2: bytes that are not valid utf-8 .*Save the file as "
      r"utf-8")
def _(t):
    return ["cda", *base(t), "--lexicon", str(raw(t / "lex.tsv", b"he\tshe\nk\xf6nig\tk\xf6nigin\n"))]


@case("runner lexicon TSV saved as UTF-16", r"lex\.tsv: a UTF-16 text file")
def _(t):
    return run(t, f"lexicon.source={utf16(t / 'lex.tsv', 'he' + chr(9) + 'she' + chr(10))}")


@case("profile YAML saved as UTF-16", r"p\.yaml: a UTF-16 text file")
def _(t):
    return ["ingest", "--params", str(PARAMS), "--profile", str(utf16(t / "p.yaml", "train:\n  epochs: 2\n"))]


@case("evaluate StereoSet JSONL with bytes that are not UTF-8", r"ss\.jsonl:2: bytes that are not valid utf-8")
def _(t):
    line = json.dumps({"type": "intrasentence", "target": "nurse", "bias_type": "gender", "context": "A BLANK.",
                       "stereotype": "A x.", "anti-stereotype": "A y.", "unrelated": "A z."}).encode()
    p = raw(t / "ss.jsonl", line + b"\n" + line.replace(b"nurse", b"n\xfcrse") + b"\n")
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--benchmarks", "stereoset", "--stereoset-path", str(p)]


@case("evaluate CrowS CSV saved as UTF-16", r"crows\.csv: a UTF-16 text file")
def _(t):
    p = utf16(t / "crows.csv", (ROOT / "tests/fixtures/evaluate/crows_tiny.csv").read_text())
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--benchmarks", "crows", "--crows-path", str(p)]


@case("runner CrowS CSV saved as UTF-16 (pre-flight)", r"crows\.csv: a UTF-16 text file")
def _(t):
    p = utf16(t / "crows.csv", (ROOT / "tests/fixtures/evaluate/crows_tiny.csv").read_text())
    return run(t, f"evaluate.crows_path={p}")


@case("cda names file saved as UTF-16", r"names\.json: a UTF-16 text file")
def _(t):
    names = utf16(t / "names.json", json.dumps([["John", "Mary"]]))
    src = table(t / "s.parquet", {"id": ["a"], "text": ["He said that John was tired."]})
    return ["cda", *base(t), "--input", str(src), "--swap-names", "--names-path", str(names)]


@case("augment review JSONL saved as UTF-16", r"out\.jsonl: a UTF-16 text file")
def _(t):
    p = utf16(t / "out.jsonl", json.dumps({"counterfactual": "She went.", "output": "She went home."}) + "\n")
    return ["augment", "review", "--params", str(PARAMS), "--input", str(p)]


# ------------------------------------------------------------------------------------------------ model files


def small_gguf(path: Path, tensors: int = 1) -> Path:
    """A real, small GGUF file (gguf's own writer): a little metadata and ``tensors`` float32 tensors."""
    import gguf
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_string("general.name", "tiny")
    for i in range(tensors):
        w.add_tensor(f"t{i}", np.ones((16, 16), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def cut(path: Path, keep: int) -> Path:
    """``path`` shortened to its first ``keep`` bytes (negative: all but the last -keep)."""
    data = path.read_bytes()
    path.write_bytes(data[:keep])
    return path


def tiny_model(t: Path, name: str = "model") -> Path:
    """A copy of the tiny random GPT-2 (config, safetensors weights, tokenizer files)."""
    import shutil

    from context_cda.models import resolve_pretrained

    dest = t / name
    shutil.copytree(resolve_pretrained("tiny:gpt2"), dest)
    return dest


def without_tokenizer(folder: Path) -> Path:
    for f in list(folder.iterdir()):
        if f.name.startswith(("tokenizer", "vocab", "merges", "special_tokens")) or f.suffix == ".model":
            f.unlink()
    return folder


@case("finetune target GGUF truncated", r"cut\.gguf: truncated GGUF file: \d+ bytes, but its 1 tensors need \d+; "
      r"download it again")
def _(t):
    return finetune(t, f"run.targets={{'tiny-gpt2': '{cut(small_gguf(t / 'cut.gguf'), -200)}'}}")


@case("runner target GGUF truncated", r"run\.targets\.tiny-gpt2: .*cut\.gguf: truncated GGUF file")
def _(t):
    return run(t, f"run.targets={{'tiny-gpt2': '{cut(small_gguf(t / 'cut.gguf'), -200)}'}}")


@case("evaluate model GGUF with a header only", r"head\.gguf: a GGUF file without tensors \(header only")
def _(t):
    return ["evaluate", *base(t), "--model", str(small_gguf(t / "head.gguf", 0)), "--benchmarks", "stereoset"]


@case("runner generator GGUF with a header only", r"augment\.model: .*head\.gguf: a GGUF file without tensors")
def _(t):
    return run(t, "augment.backend=hf", f"augment.model={small_gguf(t / 'head.gguf', 0)}")


@case("entropy target GGUF cut inside its header", r"h\.gguf: truncated GGUF file: its header runs past the end")
def _(t):
    return entropy(t, f"run.targets={{'t': '{cut(small_gguf(t / 'h.gguf'), 30)}'}}")


@case("finetune target GGUF of version 1", r"v1\.gguf: damaged GGUF header \(GGUF version 1; only versions 2 and 3")
def _(t):
    p = small_gguf(t / "v1.gguf")
    data = p.read_bytes()
    p.write_bytes(data[:4] + (1).to_bytes(4, "little") + data[8:])
    return finetune(t, f"run.targets={{'tiny-gpt2': '{p}'}}")


@case("finetune target safetensors truncated", r"model\.safetensors: truncated safetensors file: \d+ bytes, but its "
      r"\d+ tensors end at byte \d+")
def _(t):
    d = tiny_model(t)
    cut(d / "model.safetensors", -1000)
    return finetune(t, f"run.targets={{'tiny-gpt2': '{d}'}}")


@case("runner target safetensors truncated", r"run\.targets\.tiny-gpt2: .*model\.safetensors: truncated or not a "
      r"safetensors file \(100 bytes; its header length reads \d+\)")
def _(t):
    d = tiny_model(t)
    cut(d / "model.safetensors", 100)
    return run(t, f"run.targets={{'tiny-gpt2': '{d}'}}")


@case("evaluate model folder without tokenizer files", r"model: no tokenizer files .*tokenizer\.save_pretrained")
def _(t):
    return ["evaluate", *base(t), "--model", str(without_tokenizer(tiny_model(t))), "--benchmarks", "crows"]


@case("runner judge folder without tokenizer files", r"entropy\.judge_model: .*judge: no tokenizer files")
def _(t):
    return run(t, f"entropy.judge_model={without_tokenizer(tiny_model(t, 'judge'))}")


@case("runner target folder without weights", r"run\.targets\.tiny-gpt2: .*model: no model weights")
def _(t):
    d = tiny_model(t)
    (d / "model.safetensors").unlink()
    return run(t, f"run.targets={{'tiny-gpt2': '{d}'}}")


@case("evaluate model shard index naming a missing shard", r"model\.safetensors\.index\.json: names shard "
      r"model-00002-of-00002\.safetensors, which is not in .*copy every shard")
def _(t):
    d = tiny_model(t)
    (d / "model.safetensors").rename(d / "model-00001-of-00002.safetensors")
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    text_file(d / "model.safetensors.index.json", json.dumps(index))
    return ["evaluate", *base(t), "--model", str(d), "--benchmarks", "crows"]


# ------------------------------------------------------------------------------------------------ numbers


@case("train.learning_rate=.inf (runner)", r"train\.learning_rate: Input should be a finite number \(got inf\)")
def _(t):
    return run(t, "train.learning_rate=.inf")


@case("train.learning_rate=.inf (finetune)", r"train\.learning_rate: Input should be a finite number \(got inf\)")
def _(t):
    return finetune(t, "train.learning_rate=.inf")


@case("train.learning_rate=5 (runner)", r"train\.learning_rate: Input should be less than or equal to 1 \(got 5\)")
def _(t):
    return run(t, "train.learning_rate=5")


@case("train.weight_decay=.nan (finetune)", r"train\.weight_decay: Input should be a finite number")
def _(t):
    return finetune(t, "train.weight_decay=.nan")


@case("augment.sampling.temperature=.inf (augment)", r"augment\.sampling\.temperature: Input should be a finite number")
def _(t):
    return augment(t, table(t / "c.parquet", cda_rows(2)), "augment.sampling.temperature=.inf")


@case("entropy.temperature=100 (sample)", r"entropy\.temperature: Input should be less than or equal to 10")
def _(t):
    return sample(t, table(t / "a.parquet", {"id": ["a"], "augmented": ["She went home."]}), "entropy.temperature=100")


@case("evaluate.bootstrap.seed=-1 (evaluate)", r"evaluate\.bootstrap\.seed: Input should be greater than or equal to 0")
def _(t):
    return ["evaluate", *base(t, "evaluate.bootstrap.seed=-1"), "--model", "tiny:gpt2"]


@case("filter.threshold=.nan (filter)", r"filter\.threshold: Input should be a finite number")
def _(t):
    return ["filter", *base(t, "filter.threshold=.nan")]


@case("filter.k=[.inf] (runner)", r"filter\.k\.0: Input should be a finite number")
def _(t):
    return run(t, "filter.k=[.inf]")


@case("evaluate.stsb.thresholds=[9] (runner)", r"evaluate\.stsb\.thresholds\.0: Input should be less than or equal "
      r"to 5")
def _(t):
    return run(t, "evaluate.stsb.thresholds=[9]")


@case("evaluate.nli_bias.thresholds=[1.5] (evaluate)", r"evaluate\.nli_bias\.thresholds\.0: Input should be less "
      r"than or equal to 1")
def _(t):
    return ["evaluate", *base(t, "evaluate.nli_bias.thresholds=[1.5]"), "--model", "tiny:gpt2"]


@case("augment min_length_ratio above max_length_ratio", r"augment: .*min_length_ratio \(5\) must not exceed "
      r"max_length_ratio \(4\)")
def _(t):
    return augment(t, table(t / "c.parquet", cda_rows(2)), "augment.min_length_ratio=5")


@case("validate min_chars above max_chars", r"validate: .*min_chars \(50\) must not exceed max_chars \(20\)")
def _(t):
    return ["validate", "--stage", "cda", *base(t, "validate.min_chars=50", "validate.max_chars=20")]


@case("tracking.promotion.min_effect=60 (register)", r"tracking\.promotion\.min_effect: Input should be less than or "
      r"equal to 50")
def _(t):
    return ["register", *base(t, "tracking.promotion.min_effect=60")]


@case("tracking.promotion.min_effect=-1 (register)", r"tracking\.promotion\.min_effect: Input should be greater than "
      r"or equal to 0 \(got -1\)")
def _(t):
    return ["register", *base(t, "tracking.promotion.min_effect=-1")]


@case("tracking.promotion.lms_delta=-0.5 (runner)", r"tracking\.promotion\.lms_delta: Input should be greater than "
      r"or equal to 0 \(got -0\.5\)")
def _(t):
    return run(t, "tracking.promotion.lms_delta=-0.5")


@case("evaluate.bootstrap.level=1.5 (register)", r"evaluate\.bootstrap\.level: Input should be less than 1 "
      r"\(got 1\.5\)")
def _(t):
    return ["register", *base(t, "evaluate.bootstrap.level=1.5")]


@case("evaluate.bootstrap.level: 0 in a profile (report)", r"level0\.yaml.*evaluate\.bootstrap\.level: Input "
      r"should be greater than 0")
def _(t):
    p = text_file(t / "level0.yaml", "evaluate:\n  bootstrap:\n    level: 0\n")
    return ["report", str(t / "run"), "--params", str(PARAMS), "--profile", str(p)]


# ------------------------------------------------------------------------------------------------ YAML, run folders


@case("profile YAML with a duplicated section (runner)", r"dup\.yaml: line 5: key 'train' is repeated \(first at "
      r"line 1\); YAML keeps only the last one")
def _(t):
    p = text_file(t / "dup.yaml", "train:\n  epochs: 3\ningest:\n  sample_n: 5\ntrain:\n  learning_rate: 0.1\n")
    return ["run", "--params", str(PARAMS), "--profile", str(p), "--run-dir", str(t / "run")]


@case("profile YAML with a duplicated key (ingest)", r"dup\.yaml: line 3: key 'epochs' is repeated \(first at line 2\)")
def _(t):
    p = text_file(t / "dup.yaml", "train:\n  epochs: 3\n  epochs: 4\n")
    return ["ingest", "--params", str(PARAMS), "--profile", str(p), "--run-dir", str(t / "run")]


@case("params file with a duplicated key", r"params\.yaml: line 4: key 'seed' is repeated \(first at line 2\)")
def _(t):
    p = text_file(t / "params.yaml", "run:\n  seed: 1\n  device: cpu\n  seed: 2\n")
    return ["ingest", "--params", str(p), "--run-dir", str(t / "run")]


@case("--set mapping with a repeated key (runner)", r"--set .*key 'a' is repeated")
def _(t):
    return run(t, "run.targets={'a': 'tiny:gpt2', 'a': 'tiny:bert'}")


@case("--run-dir '' (ingest)", r"run\.run_dir: .*empty: name the run folder")
def _(t):
    return ["ingest", *base(t), "--path", str(CORPUS), "--run-dir", ""]


@case("--run-dir '' (runner)", r"run\.run_dir: .*empty: name the run folder")
def _(t):
    return [*run(t), "--run-dir", ""]


def symlink_loop(t: Path) -> Path:
    (t / "loop-a").symlink_to(t / "loop-b")
    (t / "loop-b").symlink_to(t / "loop-a")
    return t / "loop-a" / "run"


@case("run folder behind a symbolic link loop (ingest)", r"loop-a/run: the run folder cannot be resolved .*point "
      r"--run-dir")
def _(t):
    return ["ingest", *base(t), "--path", str(CORPUS), "--run-dir", str(symlink_loop(t))]


@case("run folder behind a symbolic link loop (runner)", r"loop-a/run: the run folder cannot be resolved")
def _(t):
    return [*run(t), "--run-dir", str(symlink_loop(t))]


# ------------------------------------------------------------------------------------------------ benchmark items


def stereoset_line(target: str = "nurse", context: str = "The nurse was BLANK.") -> str:
    return json.dumps({"type": "intrasentence", "target": target, "bias_type": "gender", "context": context,
                       "stereotype": context.replace("BLANK", "caring"),
                       "anti-stereotype": context.replace("BLANK", "rude"),
                       "unrelated": context.replace("BLANK", "pencil")})


@case("evaluate StereoSet JSONL with a repeated cluster", r"ss\.jsonl:3: duplicate cluster id '[0-9a-f]+' \(first at "
      r".*ss\.jsonl:1\); each item must appear once")
def _(t):
    p = text_file(t / "ss.jsonl", "\n".join([stereoset_line(), stereoset_line("man", "The man was BLANK."),
                                             stereoset_line()]) + "\n")
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--benchmarks", "stereoset", "--stereoset-path", str(p)]


@case("evaluate StereoSet JSON with a repeated cluster id", r"data\.intrasentence\[\d+\]: duplicate cluster id 'c1'")
def _(t):
    doc = json.loads(STEREOSET.read_text())
    doc["data"]["intrasentence"].append(doc["data"]["intrasentence"][0])
    p = text_file(t / "ss.json", json.dumps(doc))
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--benchmarks", "stereoset", "--stereoset-path", str(p)]


@case("evaluate CrowS CSV with a repeated pair id", r"crows\.csv:3: duplicate pair id 'crows-0' \(first at .*crows\.csv"
      r":2\)")
def _(t):
    lines = (ROOT / "tests/fixtures/evaluate/crows_tiny.csv").read_text().splitlines()
    p = text_file(t / "crows.csv", "\n".join([lines[0], lines[1], lines[1], *lines[2:]]) + "\n")
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--benchmarks", "crows", "--crows-path", str(p)]


@case("runner StereoSet with a repeated cluster (pre-flight)", r"ss\.jsonl:2: duplicate cluster id")
def _(t):
    p = text_file(t / "ss.jsonl", stereoset_line() + "\n" + stereoset_line() + "\n")
    return run(t, f"evaluate.stereoset_path={p}")


@case("finetune with a malformed CrowS file (before its model)", r"crows\.csv: line 1: missing column\(s\) sent_more")
def _(t):
    bad = text_file(t / "crows.csv", "a,b\n1,2\n")
    return ["finetune", *base(t, f"evaluate.crows_path={bad}"), "--input", str(good_corpus(t)), "--arm", "cda"]


# ------------------------------------------------------------------------------------------------ services


DOWN = "http://127.0.0.1:9"  # nothing listens on the discard port


@case("runner tracking server down", r"tracking\.uri: the MLflow tracking server at http://127\.0\.0\.1:9/health does "
      r"not answer \(Connection refused\)\. Start it .*tracking\.enabled=false")
def _(t):
    return run(t, f"tracking.uri={DOWN}")


@case("runner MLFLOW_TRACKING_URI down", r"MLFLOW_TRACKING_URI: the MLflow tracking server at http://127\.0\.0\.1:9",
      env={"MLFLOW_TRACKING_URI": DOWN})
def _(t):
    return run(t)


@case("finetune tracking server down", r"tracking\.uri: the MLflow tracking server at .* does not answer")
def _(t):
    return finetune(t, f"tracking.uri={DOWN}")


@case("register tracking server down", r"tracking\.uri: the MLflow tracking server at .* does not answer")
def _(t):
    return ["register", *base(t, f"tracking.uri={DOWN}")]


@case("runner S3 endpoint down (corpus on S3)", r"the S3 endpoint for s3://bucket/corpus\.txt \(AWS_ENDPOINT_URL\) at "
      r"http://127\.0\.0\.1:9 does not answer", env={"AWS_ENDPOINT_URL": DOWN})
def _(t):
    return ["run", *base(t, "ingest.path=s3://bucket/corpus.txt")]


@case("runner S3 endpoint down (target on S3)", r"the S3 endpoint for s3://models/tiny/ .*does not answer",
      env={"AWS_ENDPOINT_URL": DOWN})
def _(t):
    return run(t, "run.targets={'tiny-gpt2': 's3://models/tiny/'}")



# ------------------------------------------------------------------------------------------------ export
# (a version without evidence, an unknown licence, a missing version: tests/unit/test_export.py, on a registry)


def full_folder(t: Path) -> Path:
    text_file(t / "mine" / "notes.txt", "keep me")
    return t / "mine"


@case("export into a folder that is not empty", r"/mine: the folder exists and is not empty; name a new or "
      r"empty folder for the model folder \(--to\)")
def _(t):
    return ["export", "--model", "tg-debiased", "--version", "1", "--to", str(full_folder(t))]


@case("export without a version", r"ccda export: name --version \(ccda export --model NAME --version N --to DIR\)")
def _(t):
    return ["export", "--model", "tg-debiased", "--to", str(t / "run" / "out")]


@case("export from a registry that is not there", r"nowhere\.db: no model registry there \(tracking\.uri")
def _(t):
    return ["export", "--model", "tg-debiased", "--version", "1", "--to", str(t / "run" / "out"),
            "--tracking-uri", f"sqlite:///{t / 'nowhere.db'}"]


@case("lm-eval tasks into a folder that is not empty", r"/mine: the folder exists and is not empty; name a new or "
      r"empty folder for the lm-eval tasks \(--to\)")
def _(t):
    return ["export", "lm-eval-tasks", "--to", str(full_folder(t))]


@case("lm-eval tasks without a folder", r"ccda export lm-eval-tasks: name the folder to write \(--to DIR\)")
def _(t):
    return ["export", "lm-eval-tasks", *base(t)[:4]]


@case("lm-eval tasks of a benchmark file that is not there", r"evaluate\.crows_path|nothere\.csv")
def _(t):
    return ["export", "lm-eval-tasks", "--to", str(t / "run" / "tasks"), *base(t)[:4],
            "--set", f"evaluate.crows_path={t}/nothere.csv"]


# ------------------------------------------------------------------------------------------------ WinoGender, WinoBias
# Every benchmark reader refuses what StereoSet's refuses (issue 36): an id or a line given twice, unpaired parts, an
# empty part, another encoding; a byte-order mark and CRLF read like plain UTF-8 (WORKS below).

WG_TEMPLATES = ("occupation(0)\tother-participant(1)\tanswer\tsentence\n"
                "nurse\tpatient\t0\tThe $OCCUPATION told the $PARTICIPANT that $NOM_PRONOUN would be late.\n"
                "nurse\tpatient\t1\tThe $OCCUPATION helped the $PARTICIPANT carry $POSS_PRONOUN bag.\n")
WG_STATS = "occupation\tbergsma_pct_female\tbls_pct_female\tbls_year\nnurse\t80.0\t90.0\t2015\n"


def wg_lines() -> list[str]:
    lines = ["sentid\tsentence"]
    for g, nom, poss in (("male", "he", "his"), ("female", "she", "her"), ("neutral", "they", "their")):
        lines.append(f"nurse.patient.0.{g}.txt\tThe nurse told the patient that {nom} would be late.")
        lines.append(f"nurse.patient.1.{g}.txt\tThe nurse helped the patient carry {poss} bag.")
    return lines


def winogender(t: Path, sentences: list[str] | None = None, templates: str = WG_TEMPLATES, stats: str = WG_STATS
               ) -> list[str]:
    """`ccda evaluate --benchmarks winogender` on a folder of the three files (the sentences as lines)."""
    folder = t / "wg"
    text_file(folder / "templates.tsv", templates)
    text_file(folder / "occupations-stats.tsv", stats)
    text_file(folder / "all_sentences.tsv", "\n".join(wg_lines() if sentences is None else sentences) + "\n")
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--benchmarks", "winogender", "--winogender-path",
            str(folder)]


@case("winogender sentence line given twice", r"all_sentences\.tsv:8: sentence id 'nurse\.patient\.0\.male\.txt' "
      r"given twice \(first at line 2\).*Remove one of the two")
def _(t):
    return winogender(t, [*wg_lines(), wg_lines()[1]])


@case("winogender one sentence under two ids", r"all_sentences\.tsv:3: the sentence 'The nurse told the patient that "
      r"he would be late\.' given twice \(first at line 2\)")
def _(t):
    lines = wg_lines()
    lines[2] = lines[2].split("\t")[0] + "\t" + lines[1].split("\t")[1]
    return winogender(t, lines)


@case("winogender schema without its female sentence", r"all_sentences\.tsv:2: schema 'nurse\.patient\.0' has no "
      r"female sentence; each schema needs its male, female and neutral sentence")
def _(t):
    return winogender(t, [ln for ln in wg_lines() if "0.female" not in ln])


@case("winogender sentences: a header and no rows", r"all_sentences\.tsv: a header and no rows")
def _(t):
    return winogender(t, ["sentid\tsentence"])


@case("winogender templates: a header and no rows", r"templates\.tsv: a header and no rows")
def _(t):
    return winogender(t, templates=WG_TEMPLATES.splitlines(keepends=True)[0])


@case("winogender template given twice", r"templates\.tsv:4: the template of occupation 'nurse' with answer 1 given "
      r"twice \(first at line 3\)")
def _(t):
    return winogender(t, templates=WG_TEMPLATES + WG_TEMPLATES.splitlines(keepends=True)[2])


@case("winogender occupation statistics given twice", r"occupations-stats\.tsv:3: occupation 'nurse' given twice")
def _(t):
    return winogender(t, stats=WG_STATS + "nurse\t80.0\t10.0\t2015\n")


@case("winogender occupation without statistics", r"all_sentences\.tsv:2: occupation 'nurse' has no row in "
      r".*occupations-stats\.tsv \(its gotcha flag needs the BLS share\)")
def _(t):
    return winogender(t, stats=WG_STATS.replace("nurse", "surgeon"))


@case("winogender BLS share above 100", r"occupations-stats\.tsv:2: bls_pct_female must be a percentage \(0-100\), "
      r"got '900'")
def _(t):
    return winogender(t, stats=WG_STATS.replace("90.0", "900"))


@case("winogender id and pronoun disagree", r"all_sentences\.tsv:4: the id says a female pronoun \('she', "
      r"\$NOM_PRONOUN\), and the sentence .* has none")
def _(t):
    lines = wg_lines()
    lines[3] = lines[3].replace(" she ", " it ")
    return winogender(t, lines)


@case("winogender file in UTF-16", r"all_sentences\.tsv: a UTF-16 text file .*save it as UTF-8")
def _(t):
    argv = winogender(t)
    (t / "wg" / "all_sentences.tsv").write_bytes("\n".join(wg_lines()).encode("utf-16"))
    return argv


WB_PRO1 = ["1 [The developer] argued with the designer because [he] did not like the design.",
           "2 The developer argued with [the designer] because [her] idea cannot be implemented."]
WB_ANTI1 = ["1 [The developer] argued with the designer because [she] did not like the design.",
            "2 The developer argued with [the designer] because [his] idea cannot be implemented."]


def winobias(t: Path, pro1: list[str] = WB_PRO1, anti1: list[str] = WB_ANTI1, **files: str) -> list[str]:
    """`ccda evaluate --benchmarks winobias` on a folder of the four test files (type 1 from ``pro1`` and
    ``anti1``, type 2 one pair) and the occupation lists (``files`` replace any of them by name)."""
    texts = {"pro_stereotyped_type1.txt.test": "\n".join(pro1) + "\n",
             "anti_stereotyped_type1.txt.test": "\n".join(anti1) + "\n",
             "pro_stereotyped_type2.txt.test": "1 The nurse met [the developer] and wished [him] well.\n",
             "anti_stereotyped_type2.txt.test": "1 The nurse met [the developer] and wished [her] well.\n"}
    folder = winobias_folder(t, {**texts, **files})
    text_file(folder / "female_occupations.txt", files.get("female_occupations.txt", "designer\nnurse\n"))
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--benchmarks", "winobias", "--winobias-path", str(folder)]


@case("winobias line given twice", r"pro_stereotyped_type1\.txt\.test:3: sentence number 1 given twice \(first at "
      r"line 1\); each sentence must appear once")
def _(t):
    return winobias(t, [*WB_PRO1, WB_PRO1[0]])


@case("winobias sentence number given twice", r"anti_stereotyped_type1\.txt\.test:2: sentence number 1 given twice")
def _(t):
    return winobias(t, anti1=[WB_ANTI1[0], WB_ANTI1[1].replace("2 ", "1 ", 1)])


@case("winobias one sentence under two numbers", r"pro_stereotyped_type1\.txt\.test:3: the sentence '\[The developer\] "
      r"argued .*' given twice \(first at line 1\)")
def _(t):
    return winobias(t, [*WB_PRO1, WB_PRO1[0].replace("1 ", "3 ", 1)], [*WB_ANTI1, WB_ANTI1[0].replace("1 ", "3 ", 1)])


@case("winobias anti file a line short", r"pro_stereotyped_type1\.txt\.test:2: sentence 2 has no anti-stereotyped "
      r"counterpart in anti_stereotyped_type1\.txt\.test \(1 of 2 pro sentences unpaired; that file has 1\)")
def _(t):
    return winobias(t, anti1=WB_ANTI1[:1])


@case("winobias anti sentence without its pro one", r"anti_stereotyped_type1\.txt\.test:3: sentence 7 has no "
      r"pro-stereotyped counterpart")
def _(t):
    return winobias(t, anti1=[*WB_ANTI1, "7 [The designer] met the developer because [she] was late."])


@case("winobias empty pro file", r"pro_stereotyped_type2\.txt\.test: no sentences; the benchmark needs all four files")
def _(t):
    return winobias(t, **{"pro_stereotyped_type2.txt.test": "\n"})


@case("winobias pair about other occupations", r"anti_stereotyped_type1\.txt\.test:2: sentence 2 is about 'nurse' and "
      r"'developer', and its pro-stereotyped counterpart .* about 'designer' and 'developer': not one sentence pair")
def _(t):
    return winobias(t, anti1=[WB_ANTI1[0], "2 The developer argued with [the nurse] because [his] idea was bad."])


@case("winobias empty occupation list", r"male_occupations\.txt: an empty occupation list")
def _(t):
    return winobias(t, **{"male_occupations.txt": "\n\n"})


@case("winobias file in UTF-16", r"anti_stereotyped_type1\.txt\.test: a UTF-16 text file")
def _(t):
    argv = winobias(t)
    (t / "wb" / "anti_stereotyped_type1.txt.test").write_bytes("\n".join(WB_ANTI1).encode("utf-16"))
    return argv


@case("winobias occupation list in UTF-16", r"female_occupations\.txt: a UTF-16 text file")
def _(t):
    argv = winobias(t)
    (t / "wb" / "female_occupations.txt").write_bytes("designer\nnurse\n".encode("utf-16"))
    return argv


@case("StereoSet file without intrasentence examples (evaluate)", r"ss\.json: no intrasentence examples")
def _(t):
    ss = text_file(t / "ss.json", json.dumps({"version": "1.0", "data": {"intrasentence": [], "intersentence": []}}))
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--benchmarks", "stereoset", "--stereoset-path", str(ss)]


@case("StereoSet file without intrasentence examples (runner)", r"ss\.json: no intrasentence examples")
def _(t):
    ss = text_file(t / "ss.json", json.dumps({"version": "1.0", "data": {"intrasentence": []}}))
    return run(t, f"evaluate.stereoset_path={ss}")


@case("CrowS-Pairs header and no pairs (evaluate)", r"crows\.csv: a header and no pairs")
def _(t):
    crows = text_file(t / "crows.csv", ",sent_more,sent_less,stereo_antistereo,bias_type\n")
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--benchmarks", "crows", "--crows-path", str(crows)]


@case("CrowS-Pairs header and no pairs (runner)", r"crows\.csv: a header and no pairs")
def _(t):
    crows = text_file(t / "crows.csv", ",sent_more,sent_less,stereo_antistereo,bias_type\n")
    return run(t, f"evaluate.crows_path={crows}")


# ------------------------------------------------------------------------------------------------ projections
# A projection is checked before it is applied - and before any model loads
# (test_projection_files_are_checked_before_any_model_loads).


def projection_file(t: Path, name: str, **tensors) -> Path:
    from safetensors.torch import save_file

    t.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(t / name))
    return t / name


def posthoc(t: Path, arm: str, artifact: Path) -> list[str]:
    return ["evaluate", *base(t, "train.arms=[cda,inlp,sentence-debias]", f"evaluate.stereoset_path={STEREOSET}"),
            "--target", "tiny-gpt2", "--arm", arm, "--artifact", str(artifact), "--benchmarks", "stereoset"]


def keep(d: int, removed: int):
    """A projection of ``d`` dimensions that removes the first ``removed``."""
    import torch

    return torch.diag(torch.tensor([0.0] * removed + [1.0] * (d - removed)))


@case("INLP projection of zeros", r"zero\.safetensors: the projection removes all 32 dimensions of the hidden states "
      r"\(rank 0\).*fewer classifiers \(baselines\.inlp\.n_classifiers\)")
def _(t):
    return posthoc(t, "inlp", projection_file(t, "zero.safetensors", projection=keep(32, 32)))


@case("INLP projection with NaN", r"nan\.safetensors: the projection holds 1 values that are not finite")
def _(t):
    p = keep(32, 1)
    p[3, 3] = float("nan")
    return posthoc(t, "inlp", projection_file(t, "nan.safetensors", projection=p))


@case("INLP projection that is the identity", r"eye\.safetensors: the projection removes no dimension \(the "
      r"identity\): the arm would score the vanilla model")
def _(t):
    return posthoc(t, "inlp", projection_file(t, "eye.safetensors", projection=keep(32, 0)))


@case("INLP matrix that is no projection", r"full\.safetensors: not an orthogonal projection \(P differs from P\^T or "
      r"P\^2 by up to")
def _(t):
    import torch

    return posthoc(t, "inlp", projection_file(t, "full.safetensors", projection=2.0 * torch.eye(32)))


@case("bias direction passed as INLP", r"sd\.safetensors: holds a SentenceDebias bias subspace \(k x d\), and the arm "
      r"is inlp: pass the inlp file \(its debias step's projection\.safetensors\) or use --arm sentence-debias")
def _(t):
    import torch

    return posthoc(t, "inlp", projection_file(t, "sd.safetensors", bias_direction=torch.ones(1, 32)))


@case("INLP projection passed as SentenceDebias", r"p\.safetensors: holds an INLP projection \(d x d\), and the arm is "
      r"sentence-debias")
def _(t):
    return posthoc(t, "sentence-debias", projection_file(t, "p.safetensors", projection=keep(32, 1)))


@case("zero bias direction", r"zero\.safetensors: bias direction 0 is zero")
def _(t):
    import torch

    return posthoc(t, "sentence-debias", projection_file(t, "zero.safetensors", bias_direction=torch.zeros(1, 32)))


@case("linearly dependent bias directions", r"dep\.safetensors: the 2 bias directions span only 1 dimensions "
      r"\(linearly dependent\)")
def _(t):
    import torch

    v = torch.ones(2, 32)
    v[1] *= 3.0
    return posthoc(t, "sentence-debias", projection_file(t, "dep.safetensors", bias_direction=v))


@case("as many bias directions as dimensions", r"all\.safetensors: 32 bias directions for 32-dimensional states "
      r"remove every dimension; use fewer components")
def _(t):
    import torch

    return posthoc(t, "sentence-debias", projection_file(t, "all.safetensors", bias_direction=torch.eye(32)))


@case("infinite bias direction", r"inf\.safetensors: the bias_direction holds 1 values that are not finite")
def _(t):
    import torch

    v = torch.ones(1, 32)
    v[0, 5] = float("inf")
    return posthoc(t, "sentence-debias", projection_file(t, "inf.safetensors", bias_direction=v))


@case("projection arm not learnt yet (evaluate)", r"debias/tiny-gpt2/inlp/projection\.safetensors: projection file "
      r"not found; run `ccda debias` for this target and arm first")
def _(t):
    return ["evaluate", *base(t, "train.arms=[cda,inlp]", f"evaluate.stereoset_path={STEREOSET}"), "--target",
            "tiny-gpt2", "--arm", "inlp", "--benchmarks", "stereoset"]


@case("debias without the run's CDA table", r"debias inlp on target tiny-gpt2: .*run/validate/cda/valid\.parquet: no "
      r"such file or folder; the debias step records its cda input: run `ccda validate --stage cda` in this run "
      r"folder first, or pass --cda PATH")
def _(t):
    return ["debias", *base(t, "train.arms=[cda,inlp]"), "--sentences", str(_ingest_folder(t, 12, 12, 12))]


@case("debias inlp with a --cda file that is not there", r"debias inlp on target tiny-gpt2: .*nowhere\.parquet: no such "
      r"file or folder; the debias step records its cda input")
def _(t):
    return ["debias", *base(t, "train.arms=[cda,inlp]"), "--sentences", str(_ingest_folder(t, 12, 12, 12)), "--cda",
            str(t / "nowhere.parquet")]


@case("debias INLP that removes every dimension", r"debias inlp on target tiny-gpt2: the 20 classifiers "
      r"\(baselines\.inlp\.n_classifiers\) removed all 32 dimensions .*nothing was written\. Use fewer classifiers: "
      r"with at most \d+ at least one dimension stays")
def _(t):
    cda = table(t / "cda.parquet", cda_rows(3))
    return ["debias", *base(t, "train.arms=[cda,inlp]", "baselines.inlp.n_classifiers=20"), "--sentences",
            str(_ingest_folder(t, 45, 45, 45)), "--cda", str(cda), "--no-progress", "--out", str(t / "elsewhere")]


@case("SentenceDebias components as many as the dimensions (debias)", r"debias sentence-debias on target tiny-gpt2: "
      r"baselines\.sentence_debias\.n_components=32, and its hidden states have 32 dimensions, and 32 directions "
      r"would remove every one; use fewer components")
def _(t):
    cda = table(t / "cda.parquet", cda_rows(12, original=[f"He said that his mother {i} was tired." for i in range(12)],
                                          counterfactual=[f"She said that her father {i} was tired." for i in range(12)]))
    return ["debias", *base(t, "train.arms=[cda,sentence-debias]", "baselines.sentence_debias.n_components=32"),
            "--sentences", str(_ingest_folder(t, 12, 12, 12)), "--cda", str(cda)]


# ------------------------------------------------------------------------------------------------ numbers at the door


def plan(t: Path, *args: str, throughput: dict | None = None) -> list[str]:
    """`ccda plan` on the default profile (its models are priced), with a changed copy of the packaged table."""
    extra = []
    if throughput is not None:
        extra = ["--throughput", str(text_file(t / "throughput.json", json.dumps(throughput)))]
    return ["plan", "--params", str(PARAMS), *args, *extra]


def throughput(**change) -> dict:
    """The packaged throughput table with ``change`` ("gpu.peak_flops": value; None removes the key)."""
    data = json.loads((ROOT / "src" / "context_cda" / "resources" / "throughput.json").read_text())
    for dotted, value in change.items():
        *path, last = dotted.split("__")
        node = data
        for k in path:
            node = node[k]
        if value is None:
            node.pop(last)
        else:
            node[last] = value
    return data


@case("plan --sentences -5", r"plan --sentences -5: the corpus size is a number of sentences, at least 1")
def _(t):
    return plan(t, "--sentences", "-5")


@case("plan --sentences 0", r"plan --sentences 0: the corpus size is a number of sentences, at least 1")
def _(t):
    return plan(t, "--sentences", "0")


@case("plan --gpus 0", r"plan --gpus 0: a run needs at least one GPU")
def _(t):
    return plan(t, "--gpus", "0")


@case("plan --gpus 1,x", r"plan --gpus 1,x: expected a number of GPUs, or several separated by commas")
def _(t):
    return plan(t, "--gpus", "1,x")


@case("throughput peak_flops NaN", r"throughput\.json: gpu\.peak_flops must be a positive number, got nan")
def _(t):
    return plan(t, throughput=throughput(gpu__peak_flops=float("nan")))


@case("throughput peak_flops negative", r"throughput\.json: gpu\.peak_flops must be a positive number, got -1")
def _(t):
    return plan(t, throughput=throughput(gpu__peak_flops=-1e15))


@case("throughput peak_flops zero", r"throughput\.json: gpu\.peak_flops must be a positive number, got 0")
def _(t):
    return plan(t, throughput=throughput(gpu__peak_flops=0))


@case("throughput MFU above 1", r"throughput\.json: gpu\.mfu\.train must be in \(0, 1\], got 40")
def _(t):
    return plan(t, throughput=throughput(gpu__mfu__train=40))


@case("throughput prefill speed-up missing", r"throughput\.json: gpu\.prefill_speedup must be a positive number, got "
      r"None")
def _(t):
    return plan(t, throughput=throughput(gpu__prefill_speedup=None))


@case("throughput measured rate zero", r"throughput\.json: rates\.score\.gpt2\.per_s must be a positive number, got 0")
def _(t):
    return plan(t, throughput=throughput(rates__score={"gpt2": {"per_s": 0, "source": "typo"}}))


@case("throughput model size negative", r"throughput\.json: models\.gpt2\.params must be a positive number")
def _(t):
    return plan(t, throughput=throughput(models__gpt2={"params": -1.24e8, "family": "causal"}))


@case("throughput model family unknown", r"throughput\.json: models\.gpt2\.family must be one of masked, causal, "
      r"seq2seq, got 'decoder'")
def _(t):
    return plan(t, throughput=throughput(models__gpt2={"params": 1.24e8, "family": "decoder"}))


@case("throughput without a gpu section", r"throughput\.json: gpu must be a mapping, got None")
def _(t):
    return plan(t, throughput=throughput(gpu=None))


@case("throughput rate of an unknown operation", r"throughput\.json: rates\.trian: unknown operation")
def _(t):
    return plan(t, throughput=throughput(rates__trian={}))


def test_a_throughput_table_without_its_about_line_still_prices(tmp_path, capsys, monkeypatch):
    """A table (e.g. hand-written) with every figure but no ``about`` text prices the plan and names its file."""
    monkeypatch.chdir(ROOT)
    table = throughput(about=None)
    capsys.readouterr()
    assert main(plan(tmp_path, throughput=table)) == 0
    assert "throughput: " + str(tmp_path / "throughput.json") in capsys.readouterr().out.replace("\n", "")


@case("entropy.min_samples above n_samples (runner)", r"entropy: entropy\.min_samples \(5\) is more than "
      r"entropy\.n_samples \(3, M\): every item would be rejected as too-few-samples")
def _(t):
    return run(t, "entropy.min_samples=5")


@case("entropy.min_samples above n_samples (sample)", r"entropy\.min_samples \(11\) is more than entropy\.n_samples "
      r"\(10, M\)")
def _(t):
    return ["sample", *base(t, "entropy.n_samples=10", "entropy.min_samples=11")]


@case("entropy.n_samples above its bound (runner)", r"entropy\.n_samples: .*M = 1000 rephrasings per item is more than "
      r"100: the judge compares up to M\(M-1\)/2 pairs")
def _(t):
    return run(t, "entropy.n_samples=1000")


@case("entropy.n_samples above its bound (entropy)", r"entropy\.n_samples: .*M = 101 rephrasings per item is more "
      r"than 100")
def _(t):
    return ["entropy", *base(t, "entropy.n_samples=101")]


@case("lexicon.ambiguous word outside the lexicon (runner)", r"lexicon\.ambiguous: 'blak' \(did you mean 'black'\?\) "
      r"is not in the race lexicon \(default\); the list replaces the built-in one")
def _(t):
    return run(t, "run.attribute=race", "evaluate.bias_type=all", "lexicon.ambiguous=[blak, white]")


@case("lexicon.ambiguous word outside the lexicon (cda)", r"lexicon\.ambiguous: 'wine' is not in the race lexicon")
def _(t):
    return ["cda", *base(t, "run.attribute=race", "lexicon.ambiguous=[wine]"), "--input", str(race_sentences(t))]


@case("lexicon.ambiguous for gender", r"lexicon\.ambiguous applies to race and religion .*run\.attribute=gender would "
      r"ignore it")
def _(t):
    return run(t, "lexicon.ambiguous=[black]")


@case("lexicon.extra_groups for gender (cda)", r"lexicon\.extra_groups applies to race and religion")
def _(t):
    return ["cda", *base(t, "lexicon.extra_groups=[[a, b]]"), "--input", str(good_corpus(t))]


@case("lexicon.extra_pairs for race (runner)", r"lexicon\.extra_pairs applies to gender \(male/female pairs\), and "
      r"run\.attribute=race would ignore it")
def _(t):
    return run(t, "run.attribute=race", "evaluate.bias_type=all", "lexicon.extra_pairs=[[king, queen]]")


@case("evaluate.arm_benchmarks unknown arm (runner)", r"evaluate\.arm_benchmarks: unknown arm 'inpl' \(did you mean "
      r"'inlp'\?\)")
def _(t):
    return run(t, "evaluate.arm_benchmarks.inpl=[stereoset]")


@case("evaluate.arm_benchmarks unknown arm (evaluate)", r"evaluate\.arm_benchmarks: unknown arm 'context_cda'")
def _(t):
    return ["evaluate", *base(t, "evaluate.arm_benchmarks.context_cda=[stereoset]"), "--model", "tiny:gpt2"]


@case("evaluate.arm_benchmarks unknown benchmark (runner)", r"evaluate\.arm_benchmarks\.cda: unknown benchmark 'crow' "
      r"\(did you mean 'crows'\?\)")
def _(t):
    return run(t, "evaluate.arm_benchmarks.cda=[stereoset, crow]")


@case("evaluate.arm_benchmarks unknown benchmark (evaluate)", r"evaluate\.arm_benchmarks\.inlp: unknown benchmark "
      r"'stereo'")
def _(t):
    return ["evaluate", *base(t, "evaluate.arm_benchmarks.inlp=[stereo]"), "--model", "tiny:gpt2"]


@case("filter.threshold negative (runner)", r"filter\.threshold: Input should be greater than 0")
def _(t):
    return run(t, "filter.threshold=-1")


@case("filter.threshold zero (filter)", r"filter\.threshold: Input should be greater than 0")
def _(t):
    return ["filter", *base(t, "filter.threshold=0")]


# ------------------------------------------------------------------------------------------------ state commands


@case("migrate an empty folder", r"/empty: not a run folder \(no layout\.json and no stage outputs\); ccda migrate "
      r"works on a run folder")
def _(t):
    (t / "empty").mkdir(parents=True)
    return ["migrate", "--params", str(PARAMS), "--run-dir", str(t / "empty")]


@case("migrate a folder that is not there", r"/nowhere: no such folder; ccda migrate works on a run folder")
def _(t):
    return ["migrate", "--params", str(PARAMS), "--run-dir", str(t / "nowhere")]


@case("migrate with an unreadable layout file", r"/r/layout\.json: unreadable layout record")
def _(t):
    text_file(t / "r" / "layout.json", "{oops")
    return ["migrate", "--params", str(PARAMS), "--run-dir", str(t / "r")]


@case("clean with an unreadable layout file", r"/r/layout\.json: unreadable layout record")
def _(t):
    text_file(t / "r" / "layout.json", '{"layout_version": "three"}')
    return ["clean", str(t / "r")]


@case("clean an empty folder", r"/empty: not a run folder \(no layout\.json and no stage outputs\); ccda clean")
def _(t):
    (t / "empty").mkdir(parents=True)
    return ["clean", str(t / "empty")]


@case("clean a file", r"/f\.txt: a file, not a folder; ccda clean works on a run folder")
def _(t):
    return ["clean", str(text_file(t / "f.txt", "x\n"))]


@case("clean a run folder of an older layout", r"/r: this run folder uses run layout 1, and this context-cda reads "
      r"layout 3")
def _(t):
    (t / "r" / "ingest").mkdir(parents=True)
    return ["clean", str(t / "r")]


@case("run --dry-run on an older layout", r"/run: this run folder uses run layout 1, and this context-cda reads "
      r"layout 3")
def _(t):
    (t / "run" / "finetune").mkdir(parents=True)
    return [*run(t), "--dry-run"]


@case("run --dry-run with an unknown benchmark", r"evaluate\.benchmarks: unknown benchmark 'crow' \(did you mean "
      r"'crows'\?\)")
def _(t):
    return [*run(t, "evaluate.benchmarks=[stereoset, crow]"), "--dry-run"]


@case("report of a metrics.csv edited by hand", r"seed-13/metrics\.csv: column\(s\) epoch hold values that are not "
      r"numbers; .*rerun that step \(ccda run --only finetune --force\)")
def _(t):
    from context_cda.layout import write_marker

    write_marker(t / "r")
    text_file(t / "r" / "finetune" / "tiny-gpt2" / "cda" / "seed-13" / "metrics.csv", "epoch,stereoset_ss\nlast,50\n")
    return ["report", str(t / "r"), "--params", str(PARAMS), "--profile", "tiny", "--no-tracking"]


@case("run --dry-run with a misspelt lexicon.ambiguous word", r"lexicon\.ambiguous: 'blak' \(did you mean 'black'\?\)")
def _(t):
    return [*run(t, "run.attribute=race", "evaluate.bias_type=all", "lexicon.ambiguous=[blak]"), "--dry-run"]


@case("report on an empty folder", r"/empty: not a run folder \(no layout\.json and no stage outputs\); ccda report")
def _(t):
    (t / "empty").mkdir(parents=True)
    return ["report", str(t / "empty"), "--params", str(PARAMS), "--profile", "tiny"]


@case("report on a folder that is not there", r"/nowhere: no such folder; ccda report works on a run folder")
def _(t):
    return ["report", str(t / "nowhere"), "--params", str(PARAMS), "--profile", "tiny"]


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
    for k, v in (c.env or {}).items():
        monkeypatch.setenv(k, v)
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
    assert len(CASES) >= 290 and len({c.id for c in CASES}) == len(CASES)
    doors = []
    for i, c in enumerate(CASES):
        (tmp_path / str(i)).mkdir()
        doors.append(c.build(tmp_path / str(i))[0])
    assert doors.count("run") >= 20  # the runner
    assert set(doors) >= {"ingest", "cda", "validate", "augment", "sample", "entropy", "filter", "finetune",
                          "evaluate", "register", "report"}  # every stage command


# ------------------------------------------------------------------------------------------------ read as text


@dataclass
class Works:
    """An input a user's editor may produce (a UTF-8 byte-order mark, CRLF or CR line ends) that must read
    exactly like the plain UTF-8 / LF file: ``check(tmp, stdout)`` looks at what the command wrote."""

    id: str
    build: Callable[[Path], list[str]]
    check: Callable[[Path, str], None]


WORKS: list[Works] = []


def works(id: str, check: Callable[[Path, str], None]):  # noqa: A002
    def deco(fn):
        WORKS.append(Works(id, fn, check))
        return fn

    return deco


BOM_BYTES = b"\xef\xbb\xbf"
LINES = ["He said that his mother was tired after the long day.", "She told her brother that the king had left.",
         "The actress thanked her father for the advice he gave."]


def editor_file(path: Path, lines: list[str], ending: str = "\r\n") -> Path:
    """``lines`` as a Windows editor saves them: a UTF-8 byte-order mark and ``ending`` after every line."""
    return raw(path, BOM_BYTES + "".join(ln + ending for ln in lines).encode("utf-8"))


def sentences(t: Path) -> list[str]:
    return sorted(pd.read_parquet(t / "run" / "ingest" / "sentences.parquet")["text"])


def same_sentences_as_plain(t: Path, _out: str) -> None:
    got = sentences(t)
    assert got == sorted(LINES), got  # every line kept, nothing of the mark or the line ends left in the text
    rejected = pd.read_parquet(t / "run" / "ingest" / "rejected.parquet")
    assert not any(str(x).startswith(("invalid-json", "missing-text")) for x in rejected["reason"])


def ingest_of(t: Path, corpus: Path) -> list[str]:
    return ["ingest", *base(t, "ingest.min_words=3", "ingest.sample_n=null"), "--path", str(corpus)]


@works("ingest .txt with a BOM and CRLF line ends", same_sentences_as_plain)
def _(t):
    return ingest_of(t, editor_file(t / "c.txt", LINES))


@works("ingest .txt with CR (old Mac) line ends", same_sentences_as_plain)
def _(t):
    return ingest_of(t, editor_file(t / "c.txt", LINES, ending="\r"))


@works("ingest .jsonl with a BOM: its first row is kept", same_sentences_as_plain)
def _(t):
    return ingest_of(t, editor_file(t / "c.jsonl", [json.dumps({"text": ln}) for ln in LINES]))


@works("ingest .csv with a BOM: the text column is found", same_sentences_as_plain)
def _(t):
    return ingest_of(t, editor_file(t / "c.csv", ["text", *(f'"{ln}"' for ln in LINES)]))


@works("ingest .txt.gz with a BOM and CRLF", same_sentences_as_plain)
def _(t):
    import gzip

    return ingest_of(t, raw(t / "c.txt.gz", gzip.compress(editor_file(t / "plain.bin", LINES).read_bytes())))


@works("ingest .parquet whose cells start with U+FEFF: removed, and the copy is a duplicate", same_sentences_as_plain)
def _(t):
    return ingest_of(t, table(t / "c.parquet", {"text": ["\ufeff" + LINES[0], *LINES]}))


def first_row_swapped(t: Path, _out: str) -> None:
    cf = pd.read_parquet(t / "run" / "cda" / "counterfactuals.parquet")
    assert cf["counterfactual"].iloc[0].startswith("She said that her"), cf["counterfactual"].iloc[0]
    manifest = json.loads((t / "run" / "cda" / "manifest.json").read_text())
    assert manifest["summary"].get("lexicon_issues", 0) == 0


def cda_of(t: Path, lexicon: Path) -> list[str]:
    src = table(t / "s.parquet", {"id": ["a"], "text": ["He said that his mother was tired."]})
    return ["cda", *base(t), "--input", str(src), "--lexicon", str(lexicon)]


@works("lexicon TSV with a BOM and CRLF: its first pair swaps", first_row_swapped)
def _(t):
    return cda_of(t, editor_file(t / "lex.tsv", ["he\tshe", "his\ther", "mother\tfather"]))


@works("lexicon JSON with a BOM", first_row_swapped)
def _(t):
    return cda_of(t, editor_file(t / "lex.json", [json.dumps([["he", "she"], ["his", "her"], ["mother", "father"]])]))


def shows_three_epochs(_t: Path, out: str) -> None:
    assert "epochs: 3" in out and "\r" not in out


@works("profile YAML with a BOM and CRLF", shows_three_epochs)
def _(t):
    return ["config", "show", "--params", str(PARAMS), "--profile", str(editor_file(t / "p.yaml", ["train:",
                                                                                                 "  epochs: 3"]))]


@works("params.yaml with a BOM", shows_three_epochs)
def _(t):
    return ["config", "show", "--params", str(editor_file(t / "params.yaml", ["train:", "  epochs: 3"]))]


def scored_every_item(t: Path, _out: str) -> None:
    import csv

    with open(ROOT / "tests/fixtures/evaluate/crows_tiny.csv", newline="") as f:
        gender = [f"crows-{r['']}" for r in csv.DictReader(f) if r["bias_type"] == "gender"]
    for bench, ids in (("stereoset", None), ("crows", gender)):
        pred = pd.read_parquet(next((t / "run").rglob(f"{bench}/predictions.parquet")))
        assert len(pred) == (len(ids) if ids else 2) and pred["id"].is_unique, pred
        assert ids is None or sorted(pred["id"]) == sorted(ids)  # the unnamed id column was read through the BOM


@works("evaluate StereoSet JSONL and CrowS CSV with BOMs and CRLF", scored_every_item)
def _(t):
    ss = editor_file(t / "ss.jsonl", [stereoset_line(), stereoset_line("man", "The man was BLANK.")])
    crows = editor_file(t / "crows.csv", (ROOT / "tests/fixtures/evaluate/crows_tiny.csv").read_text().splitlines())
    return ["evaluate", *base(t), "--model", "tiny:gpt2", "--benchmarks", "stereoset,crows", "--stereoset-path",
            str(ss), "--crows-path", str(crows), "--name", "m"]


def reviewed_both(t: Path, _out: str) -> None:
    verdicts = pd.read_parquet(t / "out.review.parquet")
    assert len(verdicts) == 2


@works("augment review JSONL with a BOM: both rows reviewed", reviewed_both)
def _(t):
    rows = [json.dumps({"counterfactual": "She went home.", "output": "She went home early."})] * 2
    return ["augment", "review", "--params", str(PARAMS), "--input", str(editor_file(t / "out.jsonl", rows)),
            "--set", "augment.review.meaning='off'"]


def scored_wino(bench: str, n: int) -> Callable[[Path, str], None]:
    def check(t: Path, _out: str) -> None:
        pred = pd.read_parquet(next((t / "run").rglob(f"{bench}/predictions.parquet")))
        assert len(pred) == n and pred["id"].is_unique, pred

    return check


@works("evaluate WinoGender files with BOMs and CRLF: every sentence scored", scored_wino("winogender", 6))
def _(t):
    argv = winogender(t)
    folder = t / "wg"
    editor_file(folder / "templates.tsv", WG_TEMPLATES.splitlines())
    editor_file(folder / "occupations-stats.tsv", WG_STATS.splitlines())
    editor_file(folder / "all_sentences.tsv", wg_lines())
    return argv


@works("evaluate WinoBias files with BOMs and CRLF: every sentence scored", scored_wino("winobias", 6))
def _(t):
    argv = winobias(t)
    for f in (t / "wb").iterdir():
        editor_file(f, f.read_text().splitlines())
    return argv


@pytest.mark.parametrize("w", WORKS, ids=[w.id for w in WORKS])
def test_editor_files_read_like_plain_utf8(w: Works, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("CCDA_PARAMS", raising=False)
    argv = w.build(tmp_path)
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, f"exit {code}, stderr:\n{err}"
    w.check(tmp_path, out)


# ------------------------------------------------------------------------------------------------ at run time


def test_a_diverging_training_run_stops_naming_the_learning_rate(tmp_path, capsys, monkeypatch):
    """A target whose weights hold NaN makes the first training loss NaN: the step stops with one line naming
    train.learning_rate, before the optimizer writes NaN anywhere; no final model, no checkpoint."""
    import numpy as np
    from safetensors.numpy import load_file, save_file

    monkeypatch.chdir(ROOT)
    d = tiny_model(tmp_path)
    weights = load_file(d / "model.safetensors")
    name = next(k for k in weights if k.endswith("wte.weight"))
    weights[name] = np.full_like(weights[name], np.nan)
    save_file(weights, d / "model.safetensors", metadata={"format": "pt"})
    capsys.readouterr()
    code = main(finetune(tmp_path, f"run.targets={{'tiny-gpt2': '{d}'}}", "tracking.enabled=false"))
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")]
    assert code == 2 and len(err) == 1, err
    assert re.search(r"finetune: the training loss is nan at epoch 1, optimizer step 1: the run diverged\. Lower "
                     r"train\.learning_rate", err[0]), err[0]
    step = tmp_path / "run" / "finetune" / "tiny-gpt2" / "cda" / "seed-13"
    assert not (step / "final").exists() and not list(step.glob("checkpoints/epoch-*"))


@pytest.mark.parametrize("door", ["evaluate", "finetune", "run"])
def test_benchmark_files_are_parsed_before_any_model_loads(door, tmp_path, capsys, monkeypatch):
    """A malformed benchmark file stops each door before it loads a model (the README promises so)."""
    import context_cda.scoring as scoring
    import context_cda.train.finetune as ft

    def no_model(*a, **k):
        raise AssertionError("a model was loaded before the benchmark files were checked")

    monkeypatch.setattr(scoring, "load_scorer", no_model)
    monkeypatch.setattr(ft, "load_target", no_model)
    monkeypatch.setattr("context_cda.generation.make_generator", no_model)
    monkeypatch.chdir(ROOT)
    bad = text_file(tmp_path / "ss.jsonl", stereoset_line() + "\n{oops\n")
    argv = {"evaluate": ["evaluate", *base(tmp_path, f"evaluate.stereoset_path={bad}"), "--model", "tiny:gpt2"],
            "finetune": ["finetune", *base(tmp_path, f"evaluate.stereoset_path={bad}"), "--input",
                         str(good_corpus(tmp_path)), "--arm", "cda"],
            "run": run(tmp_path, f"evaluate.stereoset_path={bad}")}[door]
    capsys.readouterr()
    assert main(argv) == 2
    assert re.search(r"ss\.jsonl: line 2: not valid JSON", capsys.readouterr().err)


def test_an_unreachable_tracking_server_is_found_within_seconds(tmp_path, capsys, monkeypatch):
    """`ccda run --only finetune` against a tracking server that never answers (a socket that accepts and stays
    silent): the pre-flight gives up after its probe timeout instead of MLflow's minutes of retries."""
    import socket
    import time

    import context_cda.data.services as services

    monkeypatch.setattr(services, "PROBE_TIMEOUT_S", 1.0)
    monkeypatch.setattr(services.probe, "__defaults__", (1.0, ()))
    monkeypatch.chdir(ROOT)
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        url = f"http://127.0.0.1:{srv.getsockname()[1]}"
        t0 = time.time()
        code = main([*run(tmp_path, f"tracking.uri={url}"), "--only", "finetune"])
        seconds = time.time() - t0
    err = capsys.readouterr().err
    assert code == 2 and f"tracking.uri: the MLflow tracking server at {url}/health does not answer (no answer " \
        "within 1 s)" in err, err
    assert seconds < 30, seconds


@pytest.mark.parametrize("bad", ["zeros", "nan", "identity", "bias direction as inlp", "missing"])
def test_projection_files_are_checked_before_any_model_loads(bad, tmp_path, capsys, monkeypatch):
    """A bad projection (issue 36: degenerate, not finite, another arm's tensor, not learnt) stops `ccda evaluate
    --arm inlp` before the benchmarks and the model load, as the README says."""
    import torch

    import context_cda.scoring as scoring

    def no_model(*a, **k):
        raise AssertionError("a model was loaded before the projection was checked")

    monkeypatch.setattr(scoring, "load_scorer", no_model)
    monkeypatch.chdir(ROOT)
    p = {"zeros": keep(32, 32), "nan": torch.full((32, 32), float("nan")), "identity": keep(32, 0)}.get(bad)
    tensors = {"bias_direction": torch.ones(1, 32)} if bad == "bias direction as inlp" else {"projection": p}
    artifact = tmp_path / "nowhere.safetensors" if bad == "missing" else projection_file(tmp_path, "p.safetensors",
                                                                                         **tensors)
    capsys.readouterr()
    assert main(posthoc(tmp_path, "inlp", artifact)) == 2
    err = capsys.readouterr().err
    assert re.search(r"^error: .*safetensors: (the projection|holds a SentenceDebias|projection file not found)", err,
                     re.M), err


def test_a_projection_that_removes_most_dimensions_is_scored_with_a_warning(tmp_path, capsys, monkeypatch):
    """28 of 32 dimensions removed is a valid projection, but its scores measure a model with most of its
    representation gone: the evaluation says so (log, aggregate) and the report's caveats repeat it."""
    from context_cda.report.baselines import projection_warnings
    from context_cda.report.findings import caveats

    monkeypatch.chdir(ROOT)
    capsys.readouterr()
    assert main(posthoc(tmp_path, "inlp", projection_file(tmp_path, "most.safetensors", projection=keep(32, 28)))) == 0
    assert "WARNING inlp on tiny-gpt2 removes 28 of the 32 dimensions" in capsys.readouterr().err
    aggregate = json.loads(next((tmp_path / "run").rglob("inlp/posthoc/aggregate.json")).read_text())
    assert aggregate["applied"]["removed"] == 28 and "28 of the 32 dimensions" in aggregate["applied"]["warning"]
    warnings = projection_warnings(tmp_path / "run" / "evaluate")
    assert len(warnings) == 1 and "removes 28 of the 32" in caveats({"projections": warnings}, None)[0]


def test_a_published_checkpoint_that_cannot_be_loaded_is_one_line(tmp_path, capsys, monkeypatch):
    """`ccda evaluate --arm <published>` whose checkpoint cannot be loaded (offline, gone): one error line naming
    it and why (it was a KeyError traceback); its aggregate records why, for the report and the runner's retry."""
    monkeypatch.chdir(ROOT)
    capsys.readouterr()
    code = main(["evaluate", *base(tmp_path, f"baselines.published={{tiny-gpt2: {{mabel: '{tmp_path / 'gone'}'}}}}"),
                 "--target", "tiny-gpt2", "--arm", "mabel", "--benchmarks", "stereoset"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip() and not NOISE.search(ln)]
    assert code == 2 and len(err) == 1 and "Traceback" not in err[0], err
    assert re.search(r"^error: evaluate \[tiny-gpt2/mabel\]: the checkpoint could not be loaded, nothing was scored "
                     r"\(.*gone.*\); .*mabel/posthoc/aggregate\.json records why", err[0]), err[0]
    aggregate = json.loads(next((tmp_path / "run").rglob("mabel/posthoc/aggregate.json")).read_text())
    assert "gone" in aggregate["unavailable"] and aggregate["metrics"] == {}


def test_an_allocation_failure_of_the_generator_is_final_not_transient(monkeypatch):
    """An out-of-memory batch of the hf generator fails the same way on every rerun: a ModelError (exit 2) naming
    the batch and the settings to lower, not an error item filed as transient (exit 75, "rerun to retry")."""
    from context_cda.errors import ModelError
    from context_cda.generation.base import SamplingParams
    from context_cda.generation.hf import HFGenerator, out_of_memory

    def no_memory(self, ids, *a, **k):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] data. DefaultCPUAllocator: not enough memory: you "
                           "tried to allocate 34359738368 bytes.")

    gen = HFGenerator("tiny:gpt2", device="cpu", batch_size=4)
    monkeypatch.setattr(HFGenerator, "_generate_batch", no_memory)
    messages = [[{"role": "user", "content": "Rephrase: he went home."}]] * 3
    with pytest.raises(ModelError, match=r"hf generator tiny:gpt2: not enough memory for a batch of 3 prompts x 50 "
                       r"samples x up to 32 new tokens \(\[enforce fail at alloc_cpu\.cpp:127\].*This is not transient"
                       r".*entropy\.batch_size for the sample step\), the samples per prompt \(entropy\.n_samples\)"):
        gen.generate(messages, SamplingParams(n=50, temperature=1.0, max_tokens=32, seed=0))
    assert out_of_memory(MemoryError()) and not out_of_memory(RuntimeError("CUDA error: device-side assert"))


def test_an_allocation_failure_anywhere_is_one_line_not_a_retry(tmp_path, capsys, monkeypatch):
    """Out of memory in any step no stage turned into its own error (a scorer's batch, a training step): exit 2
    and one line with the cause and the settings to lower, never a traceback and never exit 75."""
    import context_cda.tools.costs as costs

    def no_memory(*a, **k):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)")

    monkeypatch.setattr(costs, "plan_costs", no_memory)
    monkeypatch.chdir(ROOT)
    capsys.readouterr()
    assert main(["plan", "--params", str(PARAMS)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert re.search(r"^error: out of memory \(CUDA out of memory\. Tried to allocate 2\.00 GiB .*\)\. This is not "
                     r"transient: a rerun fails the same way .*Lower the batch size", err), err


def test_the_runner_refuses_to_write_an_inlp_matrix_that_removes_every_dimension(tmp_path, capsys, monkeypatch):
    """The runner's door onto the debias step (`ccda run --only debias`): the same one line as `ccda debias`, and
    no matrix written, so no evaluation can score it."""
    monkeypatch.chdir(ROOT)
    from context_cda.layout import write_marker

    run_dir = tmp_path / "r"
    write_marker(run_dir)
    ingest = _ingest_folder(tmp_path, 45, 45, 45)
    (run_dir / "ingest").mkdir(parents=True)
    for f in ingest.iterdir():
        (run_dir / "ingest" / f.name).write_bytes(f.read_bytes())
    table(run_dir / "validate" / "cda" / "valid.parquet", cda_rows(3))
    capsys.readouterr()
    code = main([*run(tmp_path, "train.arms=[cda,inlp]", "baselines.inlp.n_classifiers=20", "tracking.enabled=false"),
                 "--run-dir", str(run_dir), "--only", "debias"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")]
    assert code == 2 and len(err) == 1, err
    assert re.search(r"debias inlp on target tiny-gpt2: the 20 classifiers .* removed all 32 dimensions", err[0]), err
    assert not list(run_dir.rglob("projection.safetensors"))
