"""The stage table's helpers: step keys, the `until` cut, looking up a step's function."""

import pytest

from context_cda import pipeline


def _step(steps, name):
    return next(s for s in steps if s.name == name)


@pytest.mark.parametrize("name", ["finetune[a/cda/seed-13]", "evaluate[a/cda/seed-13]"])
def test_adding_a_seed_leaves_the_done_seeds_steps_up_to_date(cfg_factory, name):
    one = cfg_factory(run={"targets": {"a": "tiny:gpt2"}}, train={"arms": ["cda"], "seeds": [13]},
                      evaluate={"after_training": True})
    two = cfg_factory(run={"targets": {"a": "tiny:gpt2"}}, train={"arms": ["cda"], "seeds": [13, 99]},
                      evaluate={"after_training": True})
    assert _step(pipeline.plan(one), name).key(one) == _step(pipeline.plan(two), name).key(two)
    # the step's own seed and the other train settings still count
    assert _step(pipeline.plan(two), name).key(two) != _step(pipeline.plan(two), name.replace("13", "99")).key(two)
    lr = cfg_factory(run={"targets": {"a": "tiny:gpt2"}}, train={"arms": ["cda"], "seeds": [13], "learning_rate": 1e-3},
                     evaluate={"after_training": True})
    if name.startswith("finetune"):
        assert _step(pipeline.plan(lr), name).key(lr) != _step(pipeline.plan(one), name).key(one)


def test_a_step_that_reads_every_seed_still_sees_the_list(cfg_factory):
    one = cfg_factory(run={"targets": {"a": "tiny:gpt2"}}, train={"seeds": [13]}, tracking={"enabled": True})
    two = cfg_factory(run={"targets": {"a": "tiny:gpt2"}}, train={"seeds": [13, 99]}, tracking={"enabled": True})
    for name in ("register[a]", "report"):
        assert _step(pipeline.plan(one), name).key(one) != _step(pipeline.plan(two), name).key(two)
