"""Tools around a run, not stages of it: costs (``ccda plan``), matmul probe, clean, migrate, pre-flight, dvcgen.
May import: the run contract, augment, data, evaluate, ingest, models, tracking, train.
"""
