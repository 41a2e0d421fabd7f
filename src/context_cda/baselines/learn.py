"""The two learnt projections, as pure functions of sentence representations (numpy in, numpy out).

* :func:`inlp_projection`: iterative nullspace projection (Ravfogel et al., 2020) with bias-bench's settings
  (``compute_projection_matrix``): the three classes split 49/21/30 % into train/dev/test
  (``train_test_split(test_size=0.3, random_state=0)`` twice); ``n_classifiers`` rounds of a linear SVM
  (``LinearSVC(fit_intercept=False, class_weight=None, dual=False, random_state=0)``) on the training vectors
  projected to the intersection of the nullspaces found so far; every classifier kept (min_accuracy 0);
  P = I - the projection onto the span of all the classifiers' rowspaces (Ben-Israel's formula, as there).
* :func:`bias_subspace`: SentenceDebias (Liang et al., 2020) as bias-bench's ``compute_gender_subspace``: each
  pair's two (normalised) representations minus their mean, stacked, and the first ``n_components`` principal
  components.

The dimension is the model's (bias-bench hard-codes 768, BERT-base's and GPT-2's, which no other width fits).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: bias-bench's classifier (Liang et al.'s settings) and its class labels
SVM_PARAMS = {"fit_intercept": False, "class_weight": None, "dual": False, "random_state": 0}
LABELS = {"male": 1, "female": 0, "neutral": -1}
#: bias-bench multiplies the training vectors by its (unused) dropout mask's scale, 1 / (1 - 0 + 1e-6)
BIAS_BENCH_SCALE = 1.0 / (1.0 + 1e-6)


@dataclass
class InlpResult:
    projection: Any  # (d, d) float64
    accuracies: list[float] = field(default_factory=list)  # dev accuracy of each round's classifier
    sizes: dict[str, int] = field(default_factory=dict)  # train / dev / test rows
    removed: list[int] = field(default_factory=list)  # dimensions removed after each round (d - rank of P)


def rowspace_projection(w: Any) -> Any:
    """The orthogonal projection onto the rowspace of ``w`` (zeros for an all-zero ``w``)."""
    import numpy as np
    import scipy.linalg

    if np.allclose(w, 0):
        return np.zeros((w.shape[1], w.shape[1]))
    basis = scipy.linalg.orth(w.T)
    return basis @ basis.T


def nullspace_intersection(rowspaces: list[Any], dim: int) -> Any:
    """The projection onto the intersection of the nullspaces: I - P_rowspace(sum of the rowspace projections)."""
    import numpy as np

    return np.eye(dim) - rowspace_projection(np.sum(rowspaces, axis=0))


def split_classes(features: Mapping[str, Any]) -> tuple[Any, Any, Any, Any, dict[str, int]]:
    """(X_train, Y_train, X_dev, Y_dev, sizes): male, female, neutral rows stacked in that order and split as
    bias-bench's ``_split_gender_dataset``."""
    import numpy as np
    from sklearn.model_selection import train_test_split

    x = np.concatenate([features[k] for k in LABELS], axis=0)
    y = np.concatenate([np.full(len(features[k]), v, dtype=int) for k, v in LABELS.items()])
    x_td, x_test, y_td, _ = train_test_split(x, y, test_size=0.3, random_state=0)
    x_train, x_dev, y_train, y_dev = train_test_split(x_td, y_td, test_size=0.3, random_state=0)
    return x_train, y_train, x_dev, y_dev, {"train": len(x_train), "dev": len(x_dev), "test": len(x_test)}


def inlp_projection(features: Mapping[str, Any], n_classifiers: int, bias_bench: bool = False,
                    progress: bool = False) -> InlpResult:
    """The INLP projection matrix from per-class representations (``features``: male, female, neutral ->
    (n, d) arrays). ``bias_bench``: scale the training vectors as bias-bench's code does."""
    import numpy as np
    from sklearn.svm import LinearSVC
    from tqdm.auto import tqdm

    x_train, y_train, x_dev, y_dev, sizes = split_classes(features)
    x_train, x_dev = x_train.astype(np.float64), x_dev.astype(np.float64)
    dim = x_train.shape[1]
    scale = BIAS_BENCH_SCALE if bias_bench else 1.0
    xt, xd = x_train.copy(), x_dev.copy()
    rowspaces, accs, removed = [], [], []
    for _ in tqdm(range(n_classifiers), desc="INLP", disable=not progress, leave=False):
        clf = LinearSVC(**SVM_PARAMS)
        clf.fit(xt * scale, y_train)
        accs.append(float(clf.score(xd, y_dev)))
        w = clf.coef_ if clf.coef_.ndim == 2 else clf.coef_[None, :]
        rowspaces.append(rowspace_projection(w))
        p = nullspace_intersection(rowspaces, dim)
        removed.append(dim - int(round(float(np.trace(p)))))
        xt, xd = (p @ x_train.T).T, (p @ x_dev.T).T
    return InlpResult(nullspace_intersection(rowspaces, dim), accs, sizes, removed)


def bias_subspace(male: Any, female: Any, n_components: int = 1) -> tuple[Any, list[float]]:
    """(components (k, d), explained variance ratios) of the pair-centred representations."""
    import numpy as np
    from sklearn.decomposition import PCA

    means = (male + female) / 2.0
    data = np.concatenate([male - means, female - means], axis=0)
    pca = PCA(n_components=n_components, svd_solver="full")
    pca.fit(data)
    return pca.components_.astype(np.float32), [float(v) for v in pca.explained_variance_ratio_]
