"""vLLM's decode ceiling for the demo's judge on this machine: tokens/s against batch and KV size.

    .venv/bin/python benchmarks/vllm_cpu_ceiling.py --model outputs/demo/models/base \\
        --prompts 64 --kv-cache-gib 2

Judges the run's evaluation pairs (their judgment prompts, repeated and made distinct up to
--prompts) with n samples at temperature 1 through rmlib's own engine settings, and prints one
JSON line. It answers one question: how many generated tokens a demo's notebook 04 can afford on
this CPU (issue #12), so run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="outputs/demo/models/base")
    ap.add_argument("--run", default="outputs/demo", help="run folder with tables/pairs_eval")
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--kv-cache-gib", type=float, default=2.0)
    ap.add_argument("--max-num-seqs", type=int, default=256)
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args()

    from vllm import SamplingParams

    from rmlib.generation.vllm import EngineSettings, engine
    from rmlib.judge.prompts import build_pref_prompt
    from rmlib.run.folder import RunFolder

    llm = engine(
        EngineSettings(
            model=args.model,
            dtype=args.dtype,
            max_model_len=2048 + args.max_new_tokens,
            kv_cache_gib=args.kv_cache_gib,
            max_num_seqs=args.max_num_seqs,
            enforce_eager=True,
        )
    )
    tok = llm.get_tokenizer()
    pairs = RunFolder(args.run).pairs("pairs_eval")
    base = [build_pref_prompt(tok, p).text for p in pairs]
    # distinct prompts (a trailing space each), so prefix caching cannot answer one from another
    prompts = [
        p + " " * i for i, p in enumerate((base * (args.prompts // len(base) + 1))[: args.prompts])
    ]
    sp = SamplingParams(
        n=args.n, temperature=1.0, max_tokens=args.max_new_tokens, seed=1, logprobs=0
    )
    start = time.perf_counter()
    out = llm.generate(prompts, sp, use_tqdm=False)
    seconds = time.perf_counter() - start
    tokens = sum(len(c.token_ids) for o in out for c in o.outputs)
    print(
        json.dumps(
            {
                "model": args.model,
                "dtype": args.dtype,
                "kv_cache_gib": args.kv_cache_gib,
                "prompts": args.prompts,
                "n": args.n,
                "prompt_tokens": sum(len(o.prompt_token_ids) for o in out),
                "generated_tokens": tokens,
                "seconds": round(seconds, 1),
                "tokens_per_s": round(tokens / seconds, 1),
            }
        )
    )


if __name__ == "__main__":
    from rmlib.cli import run_script

    raise SystemExit(run_script(main))
