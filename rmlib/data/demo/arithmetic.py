"""The arithmetic family: sums, differences and products, the worse answer off by a plausible
slip."""

from __future__ import annotations

import random

from rmlib.data.demo.items import DemoItem


def gen_add(rng: random.Random) -> DemoItem:
    a, b = rng.randint(11, 99), rng.randint(11, 99)
    tens, units = a // 10 * 10 + b // 10 * 10, a % 10 + b % 10
    slip = units + _slip(rng, units)
    steps = f"{a // 10 * 10} + {b // 10 * 10} = {tens} and {a % 10} + {b % 10} = {{u}}"
    q = rng.choice(["What is {a} + {b}?", "Compute {a} + {b}.", "Calculate {a} plus {b}."])
    return _arith("add", q.format(a=a, b=b), f"{a} + {b}", steps, tens, units, slip)


def gen_sub(rng: random.Random) -> DemoItem:
    b = rng.choice([x for x in range(12, 90) if x % 10])
    a = rng.randint(b + 10, 199)
    mid = a - b // 10 * 10
    ans = mid - b % 10
    wrong = ans + _slip(rng, ans)
    q = rng.choice(["What is {a} - {b}?", "Compute {a} - {b}.", "Calculate {a} minus {b}."])
    step = f"{a} - {b // 10 * 10} = {mid}, then {mid} - {b % 10} = {{r}}"
    good = f"{step.format(r=ans)}. So {a} - {b} = {ans}."
    bad = f"{step.format(r=wrong)}. So {a} - {b} = {wrong}."
    facts = {
        "expr": f"{a} - {b}",
        "answer": ans,
        "wrong": wrong,
        "good_step": f"{mid} - {b % 10} = {ans}",
        "bad_step": f"{mid} - {b % 10} = {wrong}",
    }
    return DemoItem(q.format(a=a, b=b), good, bad, "sub", facts)


def gen_mul(rng: random.Random) -> DemoItem:
    a = rng.choice([x for x in range(11, 50) if x % 10])
    b = rng.randint(3, 9)
    tens, units = a // 10 * 10 * b, a % 10 * b
    slip = units + _slip(rng, units)
    steps = f"{a // 10 * 10} × {b} = {tens} and {a % 10} × {b} = {{u}}"
    q = rng.choice(["What is {a} × {b}?", "Compute {a} × {b}.", "Calculate {a} times {b}."])
    return _arith("mul", q.format(a=a, b=b), f"{a} × {b}", steps, tens, units, slip)


def _slip(rng: random.Random, value: int) -> int:
    """A small nonzero error that keeps the value positive."""
    return rng.choice([d for d in (-3, -2, -1, 1, 2, 3) if value + d > 0])


def _arith(
    kind: str, query: str, expr: str, steps: str, tens: int, units: int, slip: int
) -> DemoItem:
    def text(u: int) -> str:
        return f"{steps.format(u=u)}, so {expr} = {tens + u}."

    last_step = steps.split(" and ")[1]
    facts = {
        "expr": expr,
        "answer": tens + units,
        "wrong": tens + slip,
        "good_step": last_step.format(u=units),
        "bad_step": last_step.format(u=slip),
    }
    return DemoItem(query, text(units), text(slip), kind, facts)
