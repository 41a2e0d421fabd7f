"""Column names shared by stages. A stage reads only the columns named here (file names: :mod:`.layout`)."""

from __future__ import annotations

# ---- every table
ID = "id"  # stable hash of the row's source
REASON = "reason"  # rejected.parquet only

# ---- ingest: the sentences table
TEXT = "text"
SOURCE = "source"  # file the sentence came from
LINE = "line"  # 1-based line (txt/jsonl) or row (csv/parquet) in that file
N_WORDS = "n_words"
ATTRIBUTE_TERMS = "attribute_terms"  # the run attribute's lexicon words found in the sentence (gender: he, mother ...)

# ---- cda: the counterfactuals table
SOURCE_ID = "source_id"  # id of the ingested sentence
ORIGINAL = "original"
COUNTERFACTUAL = "counterfactual"
SWAPPED_TERMS = "swapped_terms"  # list of "from->to" strings, in order of occurrence
N_SWAPS = "n_swaps"
DIRECTION = "direction"  # m2f | f2m | mixed | none (gender); <group>-><group> | mixed (race, religion); neutral
SKIPPED_TERMS = "skipped_terms"  # "word: reason" of attribute words left alone (name, not-a-person, no-neutral-form)
IS_COUNTERFACTUAL = "is_counterfactual"  # two-sided output keeps originals (False) beside counterfactuals (True)
# ``text`` holds what downstream training reads: the counterfactual, or the original in two-sided rows


# ---- augment: the augmented table
AUGMENTED = "augmented"  # the contextual counterfactual
CDA_ID = "cda_id"  # id of the counterfactual row it rephrases
RAW_OUTPUT = "raw_output"
ATTEMPTS = "attempts"
GEN_MODEL = "gen_model"
PROMPT_VERSION = "prompt_version"

# ---- entropy / filter: the scores and filtered-corpus tables
SE = "se"
SE_EQ1 = "se_eq1"
SE_PLOGP = "se_plogp"
SE_DISCRETE = "se_discrete"
N_CLUSTERS = "n_clusters"
