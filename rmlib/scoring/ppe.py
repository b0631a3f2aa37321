"""PPE-Preference's official rule: plain accuracy over pairs (per subset too), registered under
its own name so the data registry's entry names it.
"""

from __future__ import annotations

from rmlib.scoring.aggregate import accuracy_aggregate
from rmlib.scoring.rules import rule

rule("ppe")(accuracy_aggregate)
