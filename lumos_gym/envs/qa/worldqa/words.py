"""WorldQA's words: the generated names of a world, their split, and the fixed vocabulary.

A :class:`_Namer` draws syllable words, each unique in its world and hashed into the bucket
of the world's split (:func:`word_split`); the tables (endings, company kinds, occupations,
title words...) are the fixed words the generator and the page templates draw from.
"""

from __future__ import annotations

import hashlib
import random

from lumos_gym.errors import LumosGymError

_TEST_BUCKETS = 5  # one generated word in five belongs to test worlds

_ONSETS = (
    "b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
    "br", "dr", "gr", "kl", "st", "tr", "th", "sh", "h", "j",
)
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ei", "ou", "ia")
_CODAS = ("", "", "", "", "n", "r", "l", "s", "m", "th", "rk", "nd")
_CITY_ENDINGS = ("mora", "holm", "ford", "vik", "stad", "port", "dale", "mere", "gard", "ona")
_COUNTRY_ENDINGS = ("ia", "land", "ara", "estan", "ovia", "ica")
_LANGUAGE_ENDINGS = ("ese", "ish", "ic", "an")
_COMPANY_KINDS = (
    ("Industries", "manufacturing"),
    ("Systems", "software"),
    ("Motors", "car"),
    ("Foods", "food"),
    ("Textiles", "textile"),
    ("Shipping", "shipping"),
    ("Energy", "energy"),
    ("Instruments", "electronics"),
    ("Publishing", "publishing"),
    ("Pharmaceuticals", "pharmaceutical"),
)
_UNIVERSITY_FORMS = (
    "{} University",
    "University of {}",
    "{} Institute of Technology",
    "{} College",
)
_BAND_NOUNS = (
    "Lanterns", "Foxes", "Engines", "Tides", "Comets", "Ravens", "Harbours", "Mirrors",
    "Orchards", "Pilots", "Satellites", "Wolves", "Meadows", "Sparrows",
)
_GENRES = ("rock", "folk", "jazz", "pop", "punk", "electronic", "blues", "indie")
_OCCUPATIONS = (
    "painter", "engineer", "chemist", "novelist", "architect", "economist", "violinist",
    "botanist", "journalist", "mathematician", "sculptor", "surgeon", "historian", "poet",
    "geologist", "film director", "photographer", "astronomer", "lawyer", "composer",
)
_INTERESTS = (
    "music", "mathematics", "drawing", "chess", "languages", "astronomy", "gardening",
    "theatre", "machines", "poetry",
)
_CITY_FEATURES = (
    "its old harbour", "a large covered market", "its stone bridges", "a botanical garden",
    "its glass factories", "a medieval cathedral", "its summer music festival",
    "a busy railway junction", "its textile mills", "a hilltop fortress",
)
_PRODUCTS = {
    "manufacturing": "machine parts",
    "software": "accounting software",
    "car": "small cars and delivery vans",
    "food": "canned soups and biscuits",
    "textile": "woollen cloth",
    "shipping": "freight services",
    "energy": "wind turbines",
    "electronics": "measuring instruments",
    "publishing": "school textbooks",
    "pharmaceutical": "generic medicines",
}
_TITLE_WORDS = (
    "Quiet", "Northern", "Glass", "Silent", "Last", "Winter", "Paper", "Hidden", "Long",
    "Distant", "Salt", "Iron", "Lantern", "River", "Harvest", "Morning",
)
_TITLE_NOUNS = (
    "Garden", "Voyage", "Letters", "Season", "Bridge", "Orchard", "Shore", "Hours", "Song",
    "Tower", "Road", "Mirror",
)


def word_split(word: str) -> str:
    """Return the split a generated word belongs to (``"test"`` for one word in five).

    Args:
        word: a generated word, e.g. ``"Velmora"``.

    Returns:
        ``"test"`` or ``"train"``, from the SHA-256 of the lower-cased word.
    """
    digest = hashlib.sha256(word.lower().encode()).digest()
    return "test" if digest[0] % _TEST_BUCKETS == 0 else "train"


class _Namer:
    """Draws new words, each unique in the world and in the bucket of the world's split."""

    def __init__(self, rng: random.Random, split: str) -> None:
        self.rng = rng
        self.split = split
        self.used: set[str] = set()

    def word(self, syllables: int, ending: str = "") -> str:
        for _ in range(10_000):
            parts = [
                self.rng.choice(_ONSETS) + self.rng.choice(_VOWELS) + self.rng.choice(_CODAS)
                for _ in range(syllables)
            ]
            word = ("".join(parts) + ending).capitalize()
            if len(word) < 4 or word.lower() in self.used or word_split(word) != self.split:
                continue
            self.used.add(word.lower())
            return word
        raise LumosGymError("the word space is exhausted; use a smaller world")
