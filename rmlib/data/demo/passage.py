"""The passage family: questions answered from a short passage, the worse answer contradicting
it."""

from __future__ import annotations

import random

from rmlib.data.demo.items import DemoItem

_NAMES = [
    "Anna",
    "Ben",
    "Carla",
    "David",
    "Elena",
    "Farid",
    "Grace",
    "Hugo",
    "Ines",
    "Jonas",
    "Kira",
    "Liam",
    "Maya",
    "Noah",
    "Olga",
]


_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


_CITIES = [
    "Lisbon",
    "Oslo",
    "Cairo",
    "Lima",
    "Seoul",
    "Dublin",
    "Nairobi",
    "Quito",
    "Vienna",
    "Hanoi",
    "Perth",
    "Tunis",
]


_SUBJECTS = ["chemistry", "history", "music", "law", "medicine", "architecture", "physics"]


_MUSEUMS = ["Art", "Science", "Natural History", "Toys", "Railways", "Maps"]


def gen_market(rng: random.Random) -> DemoItem:
    name = rng.choice(_NAMES)
    day, other_day = rng.sample(_DAYS, 2)
    apples, pears = rng.sample(range(2, 13), 2)
    passage = f"{name} went to the market on {day} and bought {apples} apples and {pears} pears."
    if rng.random() < 0.5:
        question = f"How many apples did {name} buy?"
        answer, wrong = f"{apples} apples", f"{pears} apples"
        fact = f"{name} bought {apples} apples"
        good, bad = f"{name} bought {answer}.", f"{name} bought {wrong}."
    else:
        question = f"On which day did {name} go to the market?"
        answer, wrong = day, other_day
        fact = f"{name} went to the market on {day}"
        good, bad = f"{name} went on {answer}.", f"{name} went on {wrong}."
    return _passage_item("market", passage, question, good, bad, answer, wrong, fact)


def gen_museum(rng: random.Random) -> DemoItem:
    city, museum = rng.choice(_CITIES), rng.choice(_MUSEUMS)
    opens, closes = rng.randint(7, 11), rng.randint(4, 6)  # never equal: a.m. distractor
    price, other = rng.sample(range(3, 25), 2)
    passage = (
        f"The {city} Museum of {museum} opens at {opens} a.m. and closes at {closes} p.m. "
        f"A ticket costs {price} dollars."
    )
    if rng.random() < 0.5:
        question = "At what time does the museum open?"
        answer, wrong = f"{opens} a.m.", f"{closes} a.m."
        fact = f"the museum opens at {opens} a.m."
        good, bad = f"It opens at {answer}", f"It opens at {wrong}"
    else:
        question = "How much does a ticket cost?"
        answer, wrong = f"{price} dollars", f"{other} dollars"
        fact = f"a ticket costs {price} dollars"
        good, bad = f"A ticket costs {answer}.", f"A ticket costs {wrong}."
    return _passage_item("museum", passage, question, good, bad, answer, wrong, fact)


def gen_biography(rng: random.Random) -> DemoItem:
    name = rng.choice(_NAMES)
    born, moved = rng.sample(_CITIES, 2)
    year, age = rng.randint(1950, 2004), rng.randint(16, 30)
    subject, other = rng.sample(_SUBJECTS, 2)
    passage = (
        f"{name} was born in {born} in {year}. At the age of {age}, {name} moved to "
        f"{moved} to study {subject}."
    )
    if rng.random() < 0.5:
        question = f"Where was {name} born?"
        answer, wrong = born, moved
        fact = f"{name} was born in {born}"
        good, bad = f"{name} was born in {answer}.", f"{name} was born in {wrong}."
    else:
        question = f"What did {name} study?"
        answer, wrong = subject, other
        fact = f"{name} moved to {moved} to study {subject}"
        good, bad = f"{name} studied {answer}.", f"{name} studied {wrong}."
    return _passage_item("biography", passage, question, good, bad, answer, wrong, fact)


def _passage_item(
    kind: str, passage: str, question: str, good: str, bad: str, answer: str, wrong: str, fact: str
) -> DemoItem:
    query = (
        f"Read the passage and answer the question.\n\nPassage: {passage}\n\nQuestion: {question}"
    )
    return DemoItem(
        query, good, bad, f"passage_{kind}", {"answer": answer, "wrong": wrong, "fact": fact}
    )
