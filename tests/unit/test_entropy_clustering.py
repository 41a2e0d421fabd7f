import pytest

from context_cda.entropy.clustering import (
    cluster_ids,
    greedy_cluster,
    greedy_cluster_many,
    su_cluster,
    su_cluster_many,
)
from context_cda.errors import ConfigError, ModelError
from context_cda.generation.judges import PairDecider, equivalent, label_map, parse_llm_label


class TableJudge:
    """Deterministic fake: directional labels from a table keyed by (premise, hypothesis); default neutral."""

    name = "table"
    symmetric = False

    def __init__(self, table=None, default="neutral"):
        self.table = table or {}
        self.default = default
        self.seen = []

    def judge(self, pairs):
        self.seen.append(list(pairs))
        return [self.table.get(p, self.default) for p in pairs]


def both(a, b, lab="entailment"):
    return {(a, b): lab, (b, a): lab}


def test_greedy_reference_order_and_ids():
    same = {frozenset(p) for p in [(0, 2), (1, 3)]}
    ids = greedy_cluster(5, lambda f, j: frozenset((f, j)) in same)
    assert ids == [0, 1, 0, 1, 2]


def test_non_transitive_case_compares_with_first_member_only():
    # A~B, B~C, but not A~C: C is compared with A (cluster 0's first member), not with B
    table = {**both("A", "B"), **both("B", "C")}
    dec = PairDecider(TableJudge(table))
    ids = greedy_cluster(3, lambda f, j: dec.equivalent("ABC"[f], "ABC"[j]))
    assert ids == [0, 0, 1]
    # order matters, deterministically: B first makes one cluster of A, B and C
    ids2 = greedy_cluster(3, lambda f, j: dec.equivalent("BAC"[f], "BAC"[j]))
    assert ids2 == [0, 0, 0]


def test_batched_driver_matches_sequential():
    import random

    rng = random.Random(0)
    items = []
    for _ in range(20):
        n = rng.randint(1, 8)
        rel = {(i, j): rng.random() < 0.35 for i in range(n) for j in range(n)}
        items.append((n, rel))
    seq = [greedy_cluster(n, lambda f, j, rel=rel: rel[(f, j)]) for n, rel in items]
    calls = []

    def batch(queries):
        calls.append(len(queries))
        return [items[k][1][(f, j)] for k, f, j in queries]

    many = greedy_cluster_many([n for n, _ in items], batch)
    assert many == seq
    assert len(calls) == max(n for n, _ in items) - 1  # one batched call per step


def test_strict_vs_lenient_rules():
    assert equivalent("entailment", "entailment", "strict")
    assert not equivalent("entailment", "neutral", "strict")
    assert equivalent("entailment", "neutral", "lenient")
    assert not equivalent("neutral", "neutral", "lenient")
    assert not equivalent("entailment", "contradiction", "lenient")
    assert not equivalent("contradiction", "contradiction", "lenient")
    with pytest.raises(ConfigError):
        equivalent("entailment", "entailment", "fuzzy")
    table = {("A", "B"): "entailment", ("B", "A"): "neutral"}
    assert not PairDecider(TableJudge(table), "strict").equivalent("A", "B")
    assert PairDecider(TableJudge(table), "lenient").equivalent("A", "B")


def test_decider_caches_ordered_pairs_batches_and_counts():
    judge = TableJudge(both("a", "b"))
    dec = PairDecider(judge, "strict", batch_size=3)
    assert dec.equivalent_many([("a", "b"), ("a", "c"), ("a", "b"), ("x", "x")]) == [True, False, True, True]
    # 2 distinct pairs x 2 directions = 4 judged; identical texts are free
    assert dec.calls == 4
    assert dec.batches == 2 and [len(b) for b in judge.seen] == [3, 1]
    assert dec.equivalent("b", "a")  # both directions already cached
    assert dec.calls == 4
    assert ("a", "b") in dec.cache and ("b", "a") in dec.cache
    assert dec.stats()["judge_requests"] == 5


def test_decider_context_is_prepended():
    judge = TableJudge({("x a", "x b"): "entailment", ("x b", "x a"): "entailment"})
    dec = PairDecider(judge, "strict")
    assert dec.equivalent("a", "b", context="x")
    assert not dec.equivalent("a", "b")


def test_label_map_by_name_not_position():
    assert label_map({0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}) == {
        0: "contradiction",
        1: "neutral",
        2: "entailment",
    }
    assert label_map({"0": "entailment", "1": "not_entailment"}) == {0: "entailment", 1: "neutral"}
    with pytest.raises(ModelError):
        label_map({0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"})


def test_parse_llm_label():
    assert parse_llm_label(" Entailment.") == "entailment"
    assert parse_llm_label("contradiction") == "contradiction"
    assert parse_llm_label("I think it is neutral") == "neutral"
    assert parse_llm_label("no idea") == "neutral"


def test_llm_judge_prompts_through_a_generator():
    from context_cda.generation.base import GenerationResult
    from context_cda.generation.judges import LLMJudge

    class Gen:
        backend, model_id = "fake", "fake"

        def __init__(self):
            self.calls = []

        def generate(self, prompts, params):
            self.calls.append((len(prompts), params))
            out = []
            for conv in prompts:
                user = conv[-1]["content"]
                premise = user.split("Premise: ")[1].split("\n")[0]
                hyp = user.split("Hypothesis: ")[1].split("\n")[0]
                out.append(GenerationResult(texts=["Entailment." if premise[0] == hyp[0] else "Neutral"]))
            return out

        def close(self):
            pass

    gen = Gen()
    dec = PairDecider(LLMJudge(gen), "strict", batch_size=8)
    assert dec.equivalent_many([("apple pie", "a pie of apples"), ("apple", "banana")]) == [True, False]
    assert gen.calls[0][0] == 4 and gen.calls[0][1].temperature == 0.0  # both directions, one batch, greedy


# ------------------------------------------------------------------------------------------ semantic-uncertainty


def _jlko_semantic_ids(strings, are_equivalent):
    """jlko/semantic_uncertainty's get_semantic_ids loop, restated: an unassigned string founds the next id and
    claims every later string equivalent to it, assigned or not."""
    ids = [-1] * len(strings)
    next_id = 0
    for i, s1 in enumerate(strings):
        if ids[i] == -1:
            ids[i] = next_id
            for j in range(i + 1, len(strings)):
                if are_equivalent(s1, strings[j]):
                    ids[j] = next_id
            next_id += 1
    return ids


def test_semantic_uncertainty_lets_a_later_founder_take_a_sample_back():
    # A~C, B~C, not A~B: the default joins C to A (first founder it matches); jlko's loop gives C to B
    table = {**both("A", "C"), **both("B", "C")}
    dec = PairDecider(TableJudge(table))
    eq = lambda f, j: dec.equivalent("ABC"[f], "ABC"[j])  # noqa: E731
    assert greedy_cluster(3, eq) == [0, 1, 0]
    assert su_cluster(3, eq) == [0, 1, 1]
    assert _jlko_semantic_ids(list("ABC"), dec.equivalent) == [0, 1, 1]
    # A~B, B~C, not A~C: B is claimed by A and never founds, so C founds cluster 1 in both
    dec2 = PairDecider(TableJudge({**both("A", "B"), **both("B", "C")}))
    eq2 = lambda f, j: dec2.equivalent("ABC"[f], "ABC"[j])  # noqa: E731
    assert greedy_cluster(3, eq2) == su_cluster(3, eq2) == [0, 0, 1]


def test_semantic_uncertainty_drivers_match_jlko_and_each_other():
    import random

    rng = random.Random(1)
    items = []
    for _ in range(40):
        n = rng.randint(1, 8)
        sym = {}
        for i in range(n):
            for j in range(i + 1, n):
                sym[(i, j)] = sym[(j, i)] = rng.random() < 0.4
        items.append((n, sym))
    one = [su_cluster(n, lambda f, j, rel=rel: rel[(f, j)]) for n, rel in items]
    ref = [_jlko_semantic_ids(list(range(n)), lambda a, b, rel=rel: rel[(a, b)]) for n, rel in items]
    assert one == ref
    calls = []

    def batch(queries):
        calls.append(len(queries))
        return [items[k][1][(f, j)] for k, f, j in queries]

    assert su_cluster_many([n for n, _ in items], batch) == one
    assert len(calls) <= max(n for n, _ in items)
    assert any(a != b for a, b in zip(one, [greedy_cluster(n, lambda f, j, rel=rel: rel[(f, j)])
                                            for n, rel in items], strict=True))


def test_both_algorithms_agree_when_equivalence_is_transitive():
    import random

    rng = random.Random(2)
    for _ in range(30):
        n = rng.randint(1, 9)
        label = [rng.randint(0, 3) for _ in range(n)]
        eq = lambda f, j, label=label: label[f] == label[j]  # noqa: E731
        assert greedy_cluster(n, eq) == su_cluster(n, eq)


def test_cluster_ids_by_name_and_the_stage_option():
    from context_cda.entropy.samples import cluster_samples

    assert cluster_ids("greedy") == (greedy_cluster, greedy_cluster_many)
    assert cluster_ids("semantic-uncertainty") == (su_cluster, su_cluster_many)
    with pytest.raises(ConfigError, match="entropy.clustering"):
        cluster_ids("kmeans")
    dec = PairDecider(TableJudge({**both("A", "C"), **both("B", "C")}))
    for batched in (True, False):
        assert cluster_samples(dec, [list("ABC")], [None], batched=batched) == [[0, 1, 0]]
        assert cluster_samples(dec, [list("ABC")], [None], batched=batched, method="semantic-uncertainty") == [
            [0, 1, 1]]
