"""The `rmlib` command line: `rmlib data stats` (more subcommands register the same way).

Adding a subcommand: write `def _add_<name>(sub)` that adds its parser to the subparsers object
and sets `func=<handler>`; list it in `COMMANDS`. A handler takes the parsed args and returns an
exit code (None = 0). Expected failures (bad data, hub unreachable, missing file, bad value) are
printed as one line on stderr with exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from rmlib.data._io import HubUnavailable
from rmlib.data.pair import DataError

EXIT_USAGE = 2
EXPECTED_ERRORS: tuple[type[BaseException], ...] = (
    DataError, HubUnavailable, FileNotFoundError, ValueError,
)


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
        "stats", help="load a source and print its summary as JSON",
        description="Load a source and print LoadResult.stats() as one JSON object "
                    f"(sources: {', '.join(SOURCES)}).")
    stats.add_argument("source", metavar="SOURCE", help=f"one of: {', '.join(SOURCES)}")
    stats.add_argument("--path", metavar="FILE_OR_DIR",
                       help="local file or folder of the hub's layout (default: the hub id)")
    stats.add_argument("--config", help="dataset config (HH-RLHF: its data_dir)")
    stats.add_argument("--split", help="split (default: the source's)")
    stats.add_argument("--seed", type=int, default=0, help="placement seed (default 0)")
    stats.add_argument("--on-error", choices=("raise", "skip"), default="raise",
                       help="stop at the first bad row, or skip and count it (default raise)")
    stats.add_argument("-o", "--option", type=_parse_option, action="append", default=[],
                       metavar="KEY=VALUE", help="a loader option, e.g. drop_ties=false")
    stats.set_defaults(func=_data_stats)


def _data_stats(args: argparse.Namespace) -> int:
    from rmlib.data import load

    result = load(args.source, args.path, split=args.split, config=args.config, seed=args.seed,
                  on_error=args.on_error, **dict(args.option))
    print(json.dumps(result.stats(), ensure_ascii=False, indent=2))
    return 0


# ---------------------------------------------------------------- main

COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [_add_data]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rmlib", description="Generative reward models with self-reflection (ReflectRM).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    if isinstance(err, FileNotFoundError) and err.filename and str(err.filename) not in text:
        text = f"{text}: {err.filename}"
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (console script and `python -m rmlib`)."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args) or 0
    except EXPECTED_ERRORS as err:
        print(f"rmlib: error: {_one_line(err)}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
