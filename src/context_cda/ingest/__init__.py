"""The ``ingest`` stage: a corpus read, normalised, split, its attribute's sentences deduplicated and sampled.
May import: the run contract, cda (the lexicon's terms), data, evaluate (decontamination).
"""
