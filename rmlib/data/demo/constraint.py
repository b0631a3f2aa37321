"""The instruction-constraint family: word counts, letter case, a required word, list length."""

from __future__ import annotations

import random

from rmlib.data.demo.items import DemoItem, table_rows

# Per topic: subjects of 1, 2, 3 words and predicates of 2, 3, 4, 5 words, so every
# subject + predicate is a natural sentence of 3 to 8 words with a known length.
# Format: topic | subjects (;-separated) | predicates (;-separated).
_TOPIC_TABLE = """
cats | Cats; House cats; Most house cats | love naps; chase small toys; sleep through the
    afternoon; watch birds from the window
the ocean | Oceans; Deep oceans; The deep oceans | move constantly; cover the planet; hide many
    strange creatures; shape the weather of coasts
coffee | Coffee; Fresh coffee; Strong fresh coffee | smells wonderful; wakes people up; tastes
    best when hot; helps many people start mornings
rain | Rain; Spring rain; A gentle rain | feeds gardens; cools the air; makes the streets shine;
    fills rivers and small lakes
bicycles | Bicycles; City bicycles; Old city bicycles | save money; reduce traffic jams; make
    commuting more fun; need oil on their chains
libraries | Libraries; Public libraries; Many public libraries | lend books; offer quiet rooms;
    host weekly reading clubs; help students find good sources
mountains | Mountains; Tall mountains; The tallest mountains | attract climbers; touch the clouds;
    keep snow all year; test the strength of hikers
bread | Bread; Fresh bread; Warm fresh bread | smells delicious; needs good flour; tastes great
    with butter; rises slowly in warm kitchens
gardens | Gardens; Small gardens; Small backyard gardens | attract bees; need regular water; grow
    tomatoes in summer; give families fresh green vegetables
music | Music; Live music; Good live music | lifts moods; brings people together; fills the whole
    room; makes long drives feel shorter
trains | Trains; Fast trains; Modern fast trains | connect cities; carry many passengers; run on
    electric power; cross the country in hours
the moon | Moonlight; The moon; The full moon | shines brightly; pulls the tides; lights up the
    night; changes shape every few days
"""


# Format: category | items (,-separated; at least 8).
_CATEGORY_TABLE = """
fruits | apple, banana, cherry, mango, pear, grape, peach, plum, kiwi
colors | red, blue, green, yellow, purple, orange, black, white, pink
animals | dog, horse, tiger, rabbit, eagle, dolphin, fox, owl, camel
countries | France, Japan, Brazil, Kenya, Canada, India, Peru, Norway, Egypt
musical instruments | piano, violin, guitar, flute, drum, trumpet, cello, harp, clarinet
vegetables | carrot, onion, potato, spinach, pepper, lettuce, leek, radish, celery
sports | soccer, tennis, rugby, golf, hockey, cricket, rowing, judo, cycling
planets | Mercury, Venus, Earth, Mars, Jupiter, Saturn, Uranus, Neptune
kitchen tools | whisk, ladle, spatula, grater, peeler, colander, rolling pin, tongs, sieve
tree species | oak, maple, birch, pine, willow, cedar, elm, ash, beech
"""


_TOPICS: dict[str, tuple[list[str], list[str]]] = {
    t: ([x.strip() for x in subj.split(";")], [x.strip() for x in pred.split(";")])
    for t, subj, pred in table_rows(_TOPIC_TABLE, 3)
}


_CATEGORIES: dict[str, list[str]] = {
    c: [x.strip() for x in items.split(",")] for c, items in table_rows(_CATEGORY_TABLE, 2)
}


def _sentences(topic: str) -> list[str]:
    subjects, predicates = _TOPICS[topic]
    return [f"{s} {p}." for s in subjects for p in predicates]


def _n_words(s: str) -> int:
    return len(s.split())


def gen_words(rng: random.Random) -> DemoItem:
    topic = rng.choice(sorted(_TOPICS))
    sents = _sentences(topic)
    good = rng.choice(sents)
    k = _n_words(good)
    bad = rng.choice([s for s in sents if abs(_n_words(s) - k) >= 2])
    q = rng.choice(
        [
            "Write one sentence about {t} in exactly {k} words.",
            "Describe {t} in a single sentence of exactly {k} words.",
            "Give me a sentence about {t} that is exactly {k} words long.",
        ]
    )
    return DemoItem(
        q.format(t=topic, k=k),
        good,
        bad,
        "word_count",
        {"k": k, "bad_k": _n_words(bad), "topic": topic},
    )


def gen_case(rng: random.Random) -> DemoItem:
    sentence = rng.choice(_sentences(rng.choice(sorted(_TOPICS))))
    if rng.random() < 0.5:
        name, short, good, bad = "all capital letters", "capitals", sentence.upper(), sentence
    else:
        name, short = "lowercase letters only", "lowercase"
        good, bad = sentence.lower(), sentence.title()
    q = rng.choice(["Rewrite this sentence in {c}: {s}", "Please write the following in {c}: {s}"])
    return DemoItem(
        q.format(c=name, s=sentence), good, bad, "case", {"case_name": name, "case_short": short}
    )


def gen_required_word(rng: random.Random) -> DemoItem:
    topic = rng.choice(sorted(_TOPICS))
    sents = _sentences(topic)
    words = sorted({w.strip(".").lower() for s in sents for w in s.split() if len(w) > 4})
    for word in rng.sample(words, len(words)):
        with_w = [s for s in sents if word in _word_set(s)]
        without = [s for s in sents if word not in _word_set(s)]
        if with_w and without:
            break
    q = rng.choice(
        [
            "Write a sentence about {t} that uses the word '{w}'.",
            "Write one sentence about {t}. It must include the word '{w}'.",
        ]
    )
    return DemoItem(
        q.format(t=topic, w=word),
        rng.choice(with_w),
        rng.choice(without),
        "required_word",
        {"word": word, "topic": topic},
    )


def _word_set(s: str) -> set[str]:
    return {w.strip(".,").lower() for w in s.split()}


def gen_list(rng: random.Random) -> DemoItem:
    category = rng.choice(sorted(_CATEGORIES))
    k = rng.randint(2, 7)
    bad_k = k + rng.choice([-1, 1]) if k > 2 else k + 1
    picked = rng.sample(_CATEGORIES[category], max(k, bad_k))
    q = rng.choice(
        [
            "List exactly {k} {c}, one per line.",
            "Name exactly {k} {c} as a list.",
            "Give me a list of exactly {k} {c}.",
        ]
    )
    return DemoItem(
        q.format(k=k, c=category),
        _bullets(picked[:k]),
        _bullets(picked[:bad_k]),
        "list",
        {"k": k, "bad_k": bad_k, "category": category},
    )


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- {x}" for x in items)
