"""The pure parts of running on several processes: the optimizer steps' plan and each rank's share of it, the shares
of the evaluation items, the settings that make a global batch, FSDP's settings, a lost peer as one line, and
vLLM's tensor / pipeline sizes. (Two real processes under torchrun: tests/integration/test_distributed.py.)"""

from __future__ import annotations

import pytest

from context_cda.config import Config, TrainConfig
from context_cda.errors import ConfigError
from context_cda.generation.vllm import parallel_sizes
from context_cda.runtime import distributed as D
from context_cda.train import loop


@pytest.mark.parametrize(("n", "batch", "accum", "glob", "world"), [
    (30, 4, 1, 12, 2), (30, 4, 1, 12, 1), (7, 2, 2, None, 3), (5, 8, 1, None, 4), (64, 4, 3, None, 2),
    (1, 1, 1, 16, 16), (33, 4, 1, 8, 8)])
def test_every_micro_batch_is_trained_once_and_every_rank_makes_the_same_passes(n, batch, accum, glob, world):
    tcfg = TrainConfig(batch_size=batch, grad_accum=accum, global_batch_size=glob)
    steps = loop.step_plan(n, tcfg, seed=13, epoch=2, world=world)
    batches = [b for step in steps for b, _ in step]
    assert batches == list(range(len(batches))) and sorted(i for s in steps for _, idx in s for i in idx) == list(range(n))
    assert all(len(s) == loop.micro_per_step(tcfg, world) for s in steps[:-1])
    assert len(steps) == loop.steps_per_epoch(n, tcfg, world)
    for step in steps:
        shares = [loop.rank_share(step, r, world) for r in range(world)]
        assert len({len(s) for s in shares}) == 1  # the same number of passes on every rank (collectives)
        real = sorted(b for s in shares for b, _, is_real in s if is_real)
        assert real == [b for b, _ in step]  # each micro-batch on exactly one rank
        # the weights world / k make the average of the ranks' gradients the mean over the step's k micro-batches
        assert sum(world / len(step) for s in shares for *_, is_real in s if is_real) / world == pytest.approx(1.0)


def test_the_same_global_batch_makes_the_same_steps_on_any_number_of_processes():
    one = loop.step_plan(40, TrainConfig(batch_size=4, global_batch_size=16), 13, 1, world=1)
    four = loop.step_plan(40, TrainConfig(batch_size=4, global_batch_size=16), 13, 1, world=4)
    assert one == four
    per_device = loop.step_plan(40, TrainConfig(batch_size=4, grad_accum=2), 13, 1, world=2)
    assert per_device == loop.step_plan(40, TrainConfig(batch_size=4, grad_accum=4), 13, 1, world=1)
    assert loop.micro_seed(13, 1, 5) == loop.micro_seed(13, 1, 5) != loop.micro_seed(13, 1, 6)


def test_a_checkpoint_resumes_on_any_world_that_makes_its_global_batch():
    ex = [{"input_ids": [1, 2, 3]}] * 4
    fp = loop.data_fingerprint
    assert fp(ex, TrainConfig(grad_accum=2), 13, "causal", 1) == fp(ex, TrainConfig(grad_accum=1), 13, "causal", 2)
    assert fp(ex, TrainConfig(), 13, "causal", 1) != fp(ex, TrainConfig(), 13, "causal", 2)
    assert fp(ex, TrainConfig(launcher="trainjob", dist_timeout_s=60), 13, "causal") == fp(ex, TrainConfig(), 13, "causal")
    fsdp = TrainConfig(strategy="fsdp", global_batch_size=16)  # sharded checkpoints: per number of processes
    assert fp(ex, fsdp, 13, "causal", 2) != fp(ex, fsdp, 13, "causal", 4)


def test_global_batch_settings_are_checked():
    with pytest.raises(ValueError, match="multiple of batch_size"):
        TrainConfig(batch_size=4, global_batch_size=10)
    with pytest.raises(ValueError, match="not both"):
        TrainConfig(batch_size=4, grad_accum=2, global_batch_size=16)


def test_the_launcher_is_not_part_of_a_fine_tunings_key():
    from context_cda import stages as T

    row = T.get("finetune")
    keys = {"target": "gpt2", "arm": "cda", "seed": 13}
    base = Config(run={"targets": {"gpt2": "gpt2"}})
    other = Config(run={"targets": {"gpt2": "gpt2"}}, train={"launcher": "trainjob"})
    assert T.key_sections(base, row, keys) == T.key_sections(other, row, keys)
    wider = Config(run={"targets": {"gpt2": "gpt2"}}, train={"global_batch_size": 64})
    assert T.key_sections(base, row, keys) != T.key_sections(wider, row, keys)


@pytest.mark.parametrize(("n", "size"), [(13, 2), (2, 4), (0, 3), (100, 7)])
def test_the_ranks_shares_of_the_items_are_contiguous_and_cover_them_in_order(n, size):
    items = list(range(n))
    parts = [list(D.World(rank=r, size=size).part(items)) for r in range(size)]
    assert sum(parts, []) == items and max(map(len, parts)) - min(map(len, parts)) <= 1


def test_the_world_comes_from_torchruns_environment(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert D.current() == D.World(rank=3, size=4, local_rank=1) and not D.current().main
    monkeypatch.setenv("WORLD_SIZE", "x")
    assert D.current().size == 1
    single = D.World()
    assert single.gather("a") == ["a"] and single.agree(5) == 5 and not single.distributed


def test_a_lost_peer_is_one_line_naming_what_is_kept(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(D.ProcessLost) as e, D.collective_errors("finetune[t/a/seed-1]", "/runs/x"):
        raise RuntimeError("[pair.cc:537] Read error [127.0.0.1]:33681: Connection reset by peer. This is typically "
                           "caused by a remote worker hanging\nmore")
    msg = str(e.value)
    assert msg.startswith("finetune[t/a/seed-1]: process 0 of 2 lost the others") and "/runs/x" in msg
    assert "\n" not in msg and e.value.exit_code == 75
    with pytest.raises(ZeroDivisionError), D.collective_errors("s", "f"):  # a bug stays a bug
        raise ZeroDivisionError


def test_fsdp_settings_and_where_fsdp_cannot_run():
    plugin = loop.fsdp_plugin(TrainConfig(strategy="fsdp"), "cuda")
    assert str(plugin.reshard_after_forward).endswith("FULL_SHARD") and "SHARDED" in str(plugin.state_dict_type)
    with pytest.raises(ConfigError, match="needs CUDA"):
        loop.fsdp_plugin(TrainConfig(strategy="fsdp"), "cpu")


@pytest.mark.parametrize(("tensor", "pipeline", "engine", "gpus", "want"), [
    (None, 1, {}, 8, (8, 1)), (None, 2, {}, 8, (4, 2)), (2, 1, {}, 8, (2, 1)), (None, 1, {}, 0, (1, 1)),
    (None, 1, {"tensor_parallel_size": 4}, 8, (4, 1)), (4, 1, {"tensor_parallel_size": 4}, 8, (4, 1)),
    (None, 1, {"pipeline_parallel_size": 2}, 8, (4, 2)), (None, 3, {}, 2, (1, 3))])
def test_vllms_parallel_sizes_come_from_the_config_else_the_nodes_gpus(tensor, pipeline, engine, gpus, want):
    if want[0] * want[1] > gpus > 0:
        with pytest.raises(ConfigError, match="this node has"):
            parallel_sizes(tensor, pipeline, engine, gpus)
        return
    got = parallel_sizes(tensor, pipeline, engine, gpus)
    assert (got["tensor_parallel_size"], got["pipeline_parallel_size"]) == want


def test_vllm_sizes_that_disagree_or_exceed_the_node_are_refused():
    with pytest.raises(ConfigError, match="disagree"):
        parallel_sizes(2, 1, {"tensor_parallel_size": 4}, 8)
    with pytest.raises(ConfigError, match="4 x 2 GPUs"):
        parallel_sizes(4, 2, {}, 4)
