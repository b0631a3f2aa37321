"""The judge itself: its two prompts (`prompts`: Pref. and Refl., rendering, the context budget;
`settings`: the params file's `prompts` section), the verdict parser (`verdict`) and judgments
as tables (`judgments`: pairs → prompts → stored generations → parsed verdicts with their
confidence). It knows nothing of the two stages (`rmlib.reflect`) or of runs.
"""
