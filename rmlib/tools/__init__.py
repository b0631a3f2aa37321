"""The tools used outside a run: `rmlib judge` (`judge`: any pairs, any judge, predictions that
`rmlib score` reads), the judge as someone else's GRPO reward (`reward`: TRL's reward_funcs,
verl's compute_score) and `rmlib serve --checkpoint` (`serve`). They build their judge's backend
with the one builder (`rmlib.generation.backends`) from the params sections a judge needs, with
no run config and no run folder.
"""
