"""The ``hf`` backend: batching, seeding, KV reuse, log-probs vs scoring, stops, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from arlkit.envs import make
from arlkit.policies import CONTEXT_LENGTH_EXCEEDED, Policy, PolicyError, Request, SamplingConfig, make_policy
from arlkit.policies.hf import HFPolicy, conversation_key, load_hf_model, process_logits
from arlkit.policies.tiny import REPLY_TOKENS
from arlkit.rollout import PromptConfig, make_jobs, run_rollouts

from .conftest import ENV, make_hf


def _close(a: tuple[float, ...] | None, b: tuple[float, ...] | None, tol: float = 1e-4) -> bool:
    assert a is not None and b is not None
    return len(a) == len(b) and bool(np.allclose(a, b, atol=tol, rtol=0))


@pytest.mark.parametrize("attention", ["arlkit", "sdpa", "eager"])
def test_batched_greedy_equals_unbatched(spiky, real_requests, attention: str) -> None:  # type: ignore[no-untyped-def]
    requests = real_requests[::3][:8]
    assert len({len(r.messages) for r in requests}) > 1  # prompts of different lengths: left padding matters
    batched = make_hf(spiky, reuse_kv=False, attention=attention).generate(requests)
    single = [make_hf(spiky, reuse_kv=False, attention=attention).generate([r])[0] for r in requests]
    assert len({b.text for b in batched}) > 1
    for b, s in zip(batched, single, strict=True):
        assert b.error is None and b.token_ids == s.token_ids and b.text == s.text
        assert _close(b.logprobs, s.logprobs)


def test_same_seed_same_samples_whatever_the_batch(spiky, real_requests) -> None:  # type: ignore[no-untyped-def]
    sampling = SamplingConfig(temperature=1.0, max_new_tokens=12)
    policy = make_hf(spiky, sampling=sampling, reuse_kv=False)
    target = real_requests[5]
    alone = policy.generate([target])[0]
    crowd = policy.generate([real_requests[0], target, real_requests[9]])[1]
    again = make_hf(spiky, sampling=sampling).generate([target])[0]
    assert alone.token_ids == crowd.token_ids == again.token_ids
    other = Request(target.messages, target.seed + 1, target.turn)
    later = Request(target.messages, target.seed, target.turn + 1)
    assert policy.generate([other])[0].token_ids != alone.token_ids
    assert policy.generate([later])[0].token_ids != alone.token_ids


def _rollouts(policy: HFPolicy, mode: str = "announced", samples: int = 2):  # type: ignore[no-untyped-def]
    tasks = make("frozenlake", **ENV).tasks("test", 3)
    jobs = make_jobs(tasks, samples, 5, seed=11)
    return run_rollouts(lambda: make("frozenlake", **ENV), jobs, policy, PromptConfig(budget_mode=mode))  # type: ignore[arg-type]


@pytest.mark.parametrize(("mode", "attention"), [("announced", "arlkit"), ("hidden", "arlkit"), ("hidden", "sdpa")])
def test_kv_reuse_across_turns_changes_nothing_but_the_work(spiky, mode: str, attention: str) -> None:  # type: ignore[no-untyped-def]
    sampling = SamplingConfig(temperature=1.0, top_p=0.95, max_new_tokens=10)
    reused = make_hf(spiky, sampling=sampling, attention=attention)
    fresh = make_hf(spiky, sampling=sampling, reuse_kv=False, max_batch_size=1, attention=attention)
    a, b = _rollouts(reused, mode), _rollouts(fresh, mode)
    turns = [(x, y) for s, t in zip(a, b, strict=True) for x, y in zip(s.turns, t.turns, strict=True)]
    assert len(turns) == sum(len(t.turns) for t in a) == sum(len(t.turns) for t in b) > 12
    for x, y in turns:
        assert x.reply == y.reply and x.token_ids == y.token_ids
        # A reused prefix sums its attention in another order than a full prefill: float32 rounding
        # moved a log-prob by up to 3.6e-4 on one machine (1e-4 held on another); a misplaced
        # position or mask moves them by tenths.
        assert _close(tuple(x.logprobs or ()), tuple(y.logprobs or ()), tol=2e-3)
    stats = reused.stats
    assert fresh.stats["prefilled_tokens"] == fresh.stats["prompt_tokens"]
    # Announced prompts change the counters near the top of the system prompt every turn, so only the
    # shared system prompt is saved; hidden prompts only grow, so almost everything is reused.
    saved = 1 - stats["prefilled_tokens"] / stats["prompt_tokens"]
    assert saved > (0.6 if mode == "hidden" else 0.15), stats


@pytest.mark.parametrize("attention", ["arlkit", "sdpa", "eager"])
def test_sampling_logprobs_equal_scoring(spiky, real_requests, attention: str) -> None:  # type: ignore[no-untyped-def]
    requests = real_requests[:6]
    messages = [r.messages for r in requests]
    for sampling in (
        SamplingConfig(temperature=0.0, max_new_tokens=12),
        SamplingConfig(temperature=1.0, max_new_tokens=12),
        SamplingConfig(temperature=0.7, top_p=0.8, top_k=40, max_new_tokens=12),
    ):
        policy = make_hf(spiky, sampling=sampling, attention=attention)
        replies = policy.generate(requests)
        scored = policy.score_ids(messages, [r.token_ids or () for r in replies], sampling=sampling)
        for reply, lp in zip(replies, scored, strict=True):
            assert _close(reply.logprobs, tuple(lp))
        if sampling.temperature in (0.0, 1.0):  # the plain scoring API (model log-probs) agrees too
            plain = policy.score(messages, [r.text for r in replies])
            for reply, lp in zip(replies, plain, strict=True):
                if policy.continuation_ids(reply.text) == list(reply.token_ids or ()):
                    assert _close(reply.logprobs, tuple(lp))


def test_process_logits_hand_computed() -> None:
    # logits [ln 4, ln 2, ln 1, ln 1] -> softmax [4, 2, 1, 1] / 8.
    logits = torch.log(torch.tensor([[4.0, 2.0, 1.0, 1.0]]))
    plain = process_logits(logits, 1.0).exp()
    assert torch.allclose(plain, torch.tensor([[0.5, 0.25, 0.125, 0.125]]))
    # top_p 0.7: mass before each sorted token is 0, 0.5, 0.75, ...; keep tokens with mass before < 0.7.
    nucleus = process_logits(logits, 1.0, top_p=0.7).exp()
    assert torch.allclose(nucleus, torch.tensor([[2 / 3, 1 / 3, 0.0, 0.0]]))
    # top_k 1 keeps the argmax; temperature 0.5 squares the odds: [16, 4, 1, 1] / 22.
    assert torch.allclose(process_logits(logits, 1.0, top_k=1).exp(), torch.tensor([[1.0, 0, 0, 0]]))
    assert torch.allclose(process_logits(logits, 0.5).exp(), torch.tensor([[16, 4, 1, 1]]) / 22)
    # greedy scoring is the model's own distribution
    assert torch.allclose(process_logits(logits, 0.0).exp(), plain)


def test_stop_string_ends_the_reply_at_the_token_that_completes_it(spiky, real_requests) -> None:  # type: ignore[no-untyped-def]
    request = real_requests[2]
    full = make_hf(spiky, stop=()).generate([request])[0]
    assert full.token_ids is not None and len(full.token_ids) == 12  # no stop: runs to the cap
    text = full.text
    stop = next(text[i : i + 3] for i in range(2, len(text) - 3) if text[i : i + 3].isprintable() and text[i : i + 3].strip())
    cut = make_hf(spiky, stop=(stop,)).generate([request])[0]
    assert cut.token_ids == full.token_ids[: len(cut.token_ids)]
    assert stop in cut.text and stop not in make_hf(spiky).tokenizer.decode(cut.token_ids[:-1], skip_special_tokens=True)


def test_changed_weights_drop_the_caches(tiny_model_dir: Path, real_requests) -> None:  # type: ignore[no-untyped-def]
    model, tokenizer = load_hf_model(tiny_model_dir)
    sampling = SamplingConfig(temperature=0.0, max_new_tokens=6)
    policy = HFPolicy(model, tokenizer, sampling, attn_implementation="sdpa")
    first = real_requests[0]
    policy.generate([first])
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 2:
                param.mul_(8.0)  # an optimizer step, in place
    # the same trajectory's next turn: its prompt extends the cached one
    follow = next(r for r in real_requests if r.seed == first.seed and r.turn == 1)
    after = policy.generate([follow])[0]
    expected = HFPolicy(model, tokenizer, sampling, attn_implementation="sdpa", reuse_kv=False).generate([follow])[0]
    assert after.token_ids == expected.token_ids


def test_bad_requests_fail_alone(spiky, real_requests) -> None:  # type: ignore[no-untyped-def]
    policy = make_hf(spiky)
    broken = Request([{"role": "system", "content": None}], seed=1, turn=0)  # type: ignore[dict-item]
    ok = real_requests[0]
    replies = policy.generate([broken, ok])
    assert replies[0].error and "chat template" in replies[0].error
    assert replies[1].error is None and replies[1].token_ids
    policy.context_length = 50  # a prompt that cannot fit: a legitimate end, not an error
    full = policy.generate([ok])[0]
    assert full.finish_reason == CONTEXT_LENGTH_EXCEEDED and full.error is None and full.text == ""


def test_the_context_window_comes_from_the_model_and_can_only_shrink(tiny_model_dir: Path, tmp_path: Path) -> None:
    small = tmp_path / "small"
    shutil.copytree(tiny_model_dir, small)
    config = json.loads((small / "config.json").read_text())
    (small / "config.json").write_text(json.dumps(config | {"max_position_embeddings": 300}))
    policy = HFPolicy.from_pretrained(small, attn_implementation="eager")
    assert policy.context_length == 300
    assert HFPolicy(policy.model, policy.tokenizer, context_length=200, attn_implementation="eager").context_length == 200
    assert HFPolicy(policy.model, policy.tokenizer, context_length=10**6, attn_implementation="eager").context_length == 300
    # the request fits exactly or not at all: prompt + max_new_tokens against the window
    request = Request([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}], seed=0, turn=0)
    n = len(policy.prompt_ids(request.messages))
    for new, fits in ((300 - n, True), (301 - n, False)):
        reply = HFPolicy(policy.model, policy.tokenizer, SamplingConfig(temperature=0.0, max_new_tokens=new),
                         context_length=300, attn_implementation="eager").generate([request])[0]
        assert (reply.finish_reason != CONTEXT_LENGTH_EXCEEDED) == fits and reply.error is None
    policy.tokenizer.model_max_length = 250  # the tokenizer's limit counts too
    assert HFPolicy(policy.model, policy.tokenizer, attn_implementation="eager").context_length == 250


def test_the_reply_cap_defaults_to_the_models_generation_config(spiky) -> None:  # type: ignore[no-untyped-def]
    model, tokenizer = spiky
    assert model.generation_config.max_new_tokens == REPLY_TOKENS  # written by `arlkit model init`
    assert HFPolicy(model, tokenizer, attn_implementation="eager").sampling.max_new_tokens == REPLY_TOKENS
    assert HFPolicy(model, tokenizer, SamplingConfig(max_new_tokens=5), attn_implementation="eager").sampling.max_new_tokens == 5


def test_bad_model_paths_raise_policy_error(tiny_model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="does not exist"):
        make_policy("hf:" + str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(PolicyError, match="not a Hugging Face model directory"):
        make_policy("hf:" + str(tmp_path / "empty"))
    bert = tmp_path / "bert"
    bert.mkdir()
    (bert / "config.json").write_text(json.dumps({"model_type": "t5"}))
    with pytest.raises(PolicyError, match="not a causal language model"):
        make_policy("hf:" + str(bert))
    plain = tmp_path / "no-template"
    shutil.copytree(tiny_model_dir, plain)
    (plain / "chat_template.jinja").unlink()
    with pytest.raises(PolicyError, match="no chat template"):
        make_policy("hf:" + str(plain))


def test_spec_builds_a_working_policy(tiny_model_dir: Path, real_requests) -> None:  # type: ignore[no-untyped-def]
    policy = make_policy(f"hf:{tiny_model_dir}", SamplingConfig(temperature=0.5, max_new_tokens=5))
    assert isinstance(policy, HFPolicy) and policy.name == f"hf:{tiny_model_dir}"
    assert policy.attn_implementation in ("eager", "arlkit")
    reply = policy.generate([real_requests[0]])[0]
    assert reply.error is None and reply.token_ids is not None and 1 <= len(reply.token_ids) <= 5


def test_finished_rows_keep_views_of_the_batch_cache_not_copies(spiky, real_requests) -> None:  # type: ignore[no-untyped-def]
    policy = make_hf(spiky)
    requests = [r for r in real_requests if r.turn == 0][:4]
    policy.generate(requests)
    entries = [policy._store.rows[conversation_key(r)] for r in requests]
    layers = spiky[0].config.num_hidden_layers
    buffers = {ptr for e in entries for ptr in e.storages()}
    assert len(buffers) == 2 * layers  # one key and one value buffer per layer, shared by all rows
    k, v = entries[0].kv[0]
    assert k.shape[1] == len(entries[0].tokens) and k.untyped_storage().nbytes() > k.numel() * k.element_size()


def test_chat_tokens_never_take_the_unknown_token_for_an_end_of_turn() -> None:
    from types import SimpleNamespace

    from arlkit.policies.chat import ChatTokens

    # a tokenizer without <|im_end|>: looking it up returns the unknown token's id (3)
    plain = SimpleNamespace(eos_token_id=2, pad_token_id=None, unk_token_id=3, convert_tokens_to_ids=lambda _: 3)
    chat = ChatTokens(plain)
    assert chat.eos_ids == {2} and chat.pad_id == 2
    chatml = SimpleNamespace(eos_token_id=2, pad_token_id=0, unk_token_id=3, convert_tokens_to_ids=lambda _: 7)
    assert ChatTokens(chatml).eos_ids == {2, 7} and ChatTokens(chatml).pad_id == 0


def test_trajectories_that_share_a_seed_across_budgets_keep_their_own_caches(spiky) -> None:  # type: ignore[no-untyped-def]
    # announced budgets 3 and 6 of one task and sample share their seeds and run side by side
    tasks = make("frozenlake", **ENV).tasks("test", 2)
    jobs = make_jobs(tasks, 1, 3, seed=2) + make_jobs(tasks, 1, 6, seed=2)
    prompt = PromptConfig(budget_mode="announced", counters="observation")  # chats that only grow

    def run(policy: Policy):  # type: ignore[no-untyped-def]
        return run_rollouts(lambda: make("frozenlake", **ENV), jobs, policy, prompt)

    reused, plain, by_seed = make_hf(spiky), make_hf(spiky, reuse_kv=False), make_hf(spiky)

    class BySeed:  # caches keyed by the seed alone: the two budgets evict each other's entries
        name = "by-seed"

        def generate(self, requests):  # type: ignore[no-untyped-def]
            return by_seed.generate_with(requests, cache_keys=[r.seed for r in requests])

    replies = [[t.reply for t in x.turns] for x in run(reused)]
    assert replies == [[t.reply for t in x.turns] for x in run(plain)] == [[t.reply for t in x.turns] for x in run(BySeed())]
    assert reused.stats["prompt_tokens"] == by_seed.stats["prompt_tokens"]
    assert reused.stats["prefilled_tokens"] < 0.7 * by_seed.stats["prefilled_tokens"]
    a = Request([], seed=5, turn=1, remaining=2)
    assert conversation_key(a) == conversation_key(Request([], seed=5, turn=2, remaining=1))  # same trajectory
    assert conversation_key(a) != conversation_key(Request([], seed=5, turn=1, remaining=5))  # another budget


def test_a_tokenizer_with_ids_past_the_embedding_is_refused_when_the_model_loads(  # type: ignore[no-untyped-def]
    tiny_model_dir, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformers import AutoTokenizer

    from arlkit.cli import main

    bad = tmp_path / "bad"
    shutil.copytree(tiny_model_dir, bad)
    tokenizer = AutoTokenizer.from_pretrained(bad)
    tokenizer.add_tokens(["frozen", "lake", "You", *(f"<extra_{i}>" for i in range(60))])  # not in the embedding
    tokenizer.save_pretrained(bad)
    with pytest.raises(PolicyError, match=r"token ids up to \d+, but the model's embedding has \d+ rows"):
        load_hf_model(bad)
    out = tmp_path / "run"
    assert main(["eval", "--env", "frozenlake", "--env-arg", "size=4", "--policy", f"hf:{bad}", "--tasks", "1",
                 "--samples", "1", "--budgets", "100%", "--bootstrap", "100", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not belong to this model" in err and "Traceback" not in err, err
    assert not out.exists()
