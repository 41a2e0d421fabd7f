"""The Kubeflow pipeline's docstring sketches its DAG: every component the wiring calls appears in it."""

import re
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "pipelines" / "context_cda_pipeline.py"


def test_the_dag_sketch_names_every_component_the_pipeline_calls():
    text = SOURCE.read_text()
    sketch = text[text.index("::\n"):text.index("exit handler:")]
    called = set(re.findall(r"\bC\.(\w+)\(", text))
    assert {"augment", "augment_merge", "sample", "sample_merge", "entropy", "matrix", "register"} <= called  # found
    missing = sorted(c for c in called - {"record_status"} if not re.search(rf"\b{c}\b", sketch))
    assert not missing, f"the DAG sketch in {SOURCE.name} does not show {missing}"
    assert "(target, arm, seed)" in sketch and "record_status" in text[text.index("exit handler:"):][:80]
    # register runs once per target, after the (target, arm, seed) loop, not inside it
    loop = sketch[sketch.index("ParallelFor (target, arm, seed)"):]
    assert re.search(r"\n        register\(target\)", loop)
