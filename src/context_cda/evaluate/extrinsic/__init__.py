"""Extrinsic bias and task quality: data loaders (GLUE, Bias in Bios, Bias-STS-B, NLI-bias templates) and pure
metric functions (TPR gap, STS bias, NLI bias, accuracy, Pearson/Spearman).

The submodules import only the standard library and numpy at import time (pandas only when a Parquet file is read).
"""
