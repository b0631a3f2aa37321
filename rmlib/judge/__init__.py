"""The judge itself: its two prompts (`prompts`: Pref. and Refl., rendering, the context budget;
`settings`: the params file's `prompts` section), the verdict parser (`verdict`) and judgments
as tables (`judgments`: pairs → prompts → stored generations → parsed verdicts with their
confidence). It knows nothing of the two stages (`rmlib.reflect`) or of runs.
"""

# Until 2026-12 `rmlib.judge` was the module now at rmlib.judge.judgments: its names say so.
_MOVED_NAMES = (
    "ROLLOUT_COLUMNS",
    "REFLECTION_COLUMNS",
    "ReflectionRequest",
    "confidence",
    "judge_pairs",
    "judge_reflections",
)


def __getattr__(name: str) -> object:
    if name in _MOVED_NAMES:
        raise ImportError(f"rmlib.judge.{name} moved: import it from rmlib.judge.judgments")
    raise AttributeError(f"module 'rmlib.judge' has no attribute {name!r}")
