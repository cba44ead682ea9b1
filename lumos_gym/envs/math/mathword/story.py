"""MathWord's building blocks: the vocabulary, quantities and steps of a story, the numbers.

Also the story context a template writes in (who was named last, which templates were used)
and :func:`_registrar`, which makes the ``@_template`` decorator of each module of step
templates (:mod:`.steps_arith`, :mod:`.steps_applied`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction

from lumos_gym.scoring.answers import normalize_number

_MAX_VALUE = Fraction(100_000)

# ---------------------------------------------------------------------------------------------
# Vocabulary


@dataclass(frozen=True)
class _Person:
    name: str
    subj: str
    obj: str
    poss: str
    plural: bool = False

    def v(self, singular: str, plural: str) -> str:
        """Pick the verb form that agrees with this subject."""
        return plural if self.plural else singular

    @property
    def does(self) -> str:
        return self.v("does", "do")

    @property
    def has(self) -> str:
        return self.v("has", "have")

    @property
    def owns(self) -> str:
        """Possessive of the name: ``Tom's``, ``Tom and Mia's``."""
        return f"{self.name}'s"


_HE = ("he", "him", "his")
_SHE = ("she", "her", "her")
_PEOPLE = tuple(
    _Person(name, *pronouns)
    for name, pronouns in (
        ("Tom", _HE), ("Mia", _SHE), ("Omar", _HE), ("Lena", _SHE), ("Kofi", _HE),
        ("Priya", _SHE), ("Diego", _HE), ("Hana", _SHE), ("Sam", _HE), ("Aisha", _SHE),
        ("Leo", _HE), ("Grace", _SHE), ("Ravi", _HE), ("Elena", _SHE), ("Jamal", _HE),
        ("Yuki", _SHE), ("Marco", _HE), ("Zoe", _SHE), ("Wei", _HE), ("Nina", _SHE),
        ("Tyrone", _HE), ("Ana", _SHE), ("Ben", _HE), ("Fatima", _SHE), ("Lucas", _HE),
        ("Ines", _SHE), ("Mateo", _HE), ("Chloe", _SHE), ("Arjun", _HE), ("Sofia", _SHE),
        ("Kenji", _HE), ("Amara", _SHE),
    )
)


@dataclass(frozen=True)
class _Item:
    one: str
    many: str
    get: tuple[str, str]  # how one comes to have them: ("bakes", "bake")
    prices: tuple[str, ...]  # plausible unit prices in dollars
    chore: tuple[str, str]  # per-item work: ("wrap", "wrapping")
    pack: tuple[str, str]  # container: ("box", "boxes")
    kinds: tuple[str, str]  # sub-kinds for percentage parts
    part: tuple[str, str, int, int] | None = None  # ("slice", "slices", low, high)
    edible: bool = False
    collectible: bool = False


_ITEMS = (
    _Item("apple", "apples", ("picks", "pick"), ("0.25", "0.5", "0.75", "1"), ("wash", "washing"),
          ("bag", "bags"), ("red", "green"), None, edible=True),
    _Item("cookie", "cookies", ("bakes", "bake"), ("0.5", "0.75", "1", "1.5"),
          ("decorate", "decorating"), ("box", "boxes"), ("chocolate chip", "oatmeal"), None,
          edible=True),
    _Item("cupcake", "cupcakes", ("bakes", "bake"), ("1.5", "2", "2.5", "3"),
          ("frost", "frosting"), ("box", "boxes"), ("vanilla", "lemon"), None, edible=True),
    _Item("muffin", "muffins", ("bakes", "bake"), ("1", "1.25", "2"), ("wrap", "wrapping"),
          ("box", "boxes"), ("blueberry", "banana"), None, edible=True),
    _Item("pizza", "pizzas", ("orders", "order"), ("8", "10", "12", "15"), ("box", "boxing"),
          ("stack", "stacks"), ("cheese", "veggie"), ("slice", "slices", 6, 12), edible=True),
    _Item("orange", "oranges", ("picks", "pick"), ("0.5", "0.75", "1"), ("peel", "peeling"),
          ("crate", "crates"), ("navel", "blood"), ("segment", "segments", 8, 12), edible=True),
    _Item("chocolate bar", "chocolate bars", ("buys", "buy"), ("1", "1.5", "2"),
          ("wrap", "wrapping"), ("box", "boxes"), ("dark", "milk"), ("piece", "pieces", 4, 12),
          edible=True),
    _Item("pencil", "pencils", ("buys", "buy"), ("0.25", "0.5", "0.75"),
          ("sharpen", "sharpening"), ("box", "boxes"), ("red", "blue")),
    _Item("notebook", "notebooks", ("buys", "buy"), ("1.25", "2", "2.5", "3"),
          ("label", "labeling"), ("pack", "packs"), ("lined", "spiral"),
          ("page", "pages", 40, 120)),
    _Item("book", "books", ("buys", "buy"), ("4", "5", "6", "8", "12"), ("cover", "covering"),
          ("box", "boxes"), ("mystery", "science"), ("page", "pages", 80, 300)),
    _Item("marble", "marbles", ("collects", "collect"), ("0.25", "0.5"), ("sort", "sorting"),
          ("jar", "jars"), ("blue", "striped"), None, collectible=True),
    _Item("sticker", "stickers", ("collects", "collect"), ("0.25", "0.5"), ("sort", "sorting"),
          ("sheet", "sheets"), ("shiny", "animal"), None, collectible=True),
    _Item("stamp", "stamps", ("collects", "collect"), ("0.5", "1", "1.5"), ("sort", "sorting"),
          ("album page", "album pages"), ("foreign", "old"), None, collectible=True),
    _Item("T-shirt", "T-shirts", ("buys", "buy"), ("6", "8", "10", "12.5"), ("fold", "folding"),
          ("box", "boxes"), ("white", "striped")),
    _Item("candle", "candles", ("makes", "make"), ("2", "3", "4.5", "5"), ("wrap", "wrapping"),
          ("box", "boxes"), ("scented", "tall")),
    _Item("bracelet", "bracelets", ("makes", "make"), ("2", "3", "4", "5"),
          ("finish", "finishing"), ("bag", "bags"), ("beaded", "silver")),
    _Item("egg", "eggs", ("collects", "collect"), ("0.25", "0.5"), ("wash", "washing"),
          ("carton", "cartons"), ("brown", "white"), None, edible=True),
    _Item("rose", "roses", ("picks", "pick"), ("1.5", "2", "2.5"), ("trim", "trimming"),
          ("bunch", "bunches"), ("red", "yellow")),
)

_PLACES = ("market", "store", "fair", "mall", "corner shop")
_BIG_BUYS = ("bike", "tablet", "guitar", "jacket", "pair of shoes", "board game", "backpack",
             "video game", "camera", "scooter", "telescope", "desk lamp")
_SMALL_BUYS = ("a movie ticket", "lunch", "a new book", "art supplies", "a bus pass",
               "a birthday present", "a plant")
_CHORES = ("walking dogs", "washing cars", "mowing lawns", "babysitting", "raking leaves")
_MEAL_FEES = ("delivery fee", "service fee")
_SHOP_FEES = ("shipping fee", "gift-wrapping fee")
_WORKPLACES = ("bakery", "library", "garden center", "bike shop", "cafe", "craft shop")
_PRODUCTS = {"bakery": ("cookie", "cupcake", "muffin"), "craft shop": ("candle", "bracelet")}
_STARTS = ("", "On Monday, ", "In the morning, ", "At the weekend, ", "This week, ")

# ---------------------------------------------------------------------------------------------
# Quantities, steps and expressions


@dataclass(frozen=True)
class _Qty:
    """A quantity of the story: a value, what it is, who it belongs to, how to ask for it."""

    value: Fraction
    kind: str  # count | cost | cash | hours | minutes | miles | gallons | weeks
    ref: str  # "R3", or the literal of a given number
    owner: _Person
    noun: tuple[str, str] = ("", "")
    item: _Item | None = None
    ask: str = ""  # the question that asks for it
    what: str = ""  # a noun phrase for subgoals: "the number of apples Tom has left"
    base: _Qty | None = None  # the quantity it was compared with (for together/difference)
    activity: str = ""  # for hours: work | drive
    place: str = ""  # for work hours: the workplace
    daily: bool = False  # for hours: the hours of one day (not a total over days)
    purchase: bool = False  # a cost that is the price of something one wants to buy
    meal: bool = False  # a cost that is a restaurant bill or a food order

    @property
    def money(self) -> bool:
        return self.kind in ("cost", "cash")


_Token = _Qty | str


@dataclass(frozen=True)
class _Step:
    category: str
    sentence: str  # the sentence of the question; "" when the step is only the final question
    tokens: tuple[_Token, ...]
    value: Fraction
    result: _Qty
    explain: str  # rationale sentence, with "{calc}" where the calculation goes
    subgoal: str
    subject: _Person | None = None
    people: tuple[_Person, ...] = ()
    template: str = ""


def _plural(n: int, noun: tuple[str, str]) -> str:
    """``"1 apple"``, ``"3 apples"``."""
    return f"{n} {noun[0] if n == 1 else noun[1]}"


_HOURS = ("hour", "hours")


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _fmt(value: Fraction) -> str:
    text = normalize_number(value)
    assert text is not None and "/" not in text, value  # values are integers or cents
    return text


def _money(value: Fraction) -> str:
    return f"${value.numerator}" if value.denominator == 1 else f"${float(value):.2f}"


def _num(value: Fraction, kind: str) -> str:
    return _money(value) if kind in ("cost", "cash") else _fmt(value)


def _render(tokens: tuple[_Token, ...], use: Callable[[_Qty], str], sep: str) -> str:
    out = sep.join(use(t) if isinstance(t, _Qty) else t for t in tokens)
    return out.replace("( ", "(").replace(" )", ")") if sep else out


def _evaluate(text: str) -> Fraction:
    """Evaluate ``+ - * / ( )`` over decimal literals exactly (internal consistency check)."""
    tokens = re.findall(r"\d+(?:\.\d+)?|[-+*/()]", text)
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def atom() -> Fraction:
        tok = take()
        if tok == "(":
            value = expr()
            take()
            return value
        if tok == "-":
            return -atom()
        return Fraction(tok)

    def term() -> Fraction:
        value = atom()
        while peek() in ("*", "/"):
            value = value * atom() if take() == "*" else value / atom()
        return value

    def expr() -> Fraction:
        value = term()
        while peek() in ("+", "-"):
            value = value + term() if take() == "+" else value - term()
        return value

    return expr()


def _clean(value: Fraction, kind: str) -> bool:
    if value <= 0 or value > _MAX_VALUE:
        return False
    if kind in ("cost", "cash"):
        return (value * 100).denominator == 1
    if kind == "hours":
        return (value * 4).denominator == 1  # whole or quarter hours: 1.25, 1.5, 1.75
    return value.denominator == 1


# ---------------------------------------------------------------------------------------------
# Story context and templates


@dataclass
class _Ctx:
    rng: random.Random
    used: list[_Person] = field(default_factory=list)
    last: _Person | None = None
    templates: set[str] = field(default_factory=set)

    def pick(self, options: tuple[str, ...] | list[str]) -> str:
        return self.rng.choice(list(options))

    def friend(self) -> _Person:
        names = {p.name for p in self.used}
        return self.rng.choice([p for p in _PEOPLE if p.name not in names])

    def who(self, p: _Person) -> str:
        """The subject at a sentence start: a pronoun when ``p`` was the last subject."""
        return p.subj.capitalize() if p is self.last else p.name

    def he(self, p: _Person) -> str:
        """The subject inside a sentence: a lower-case pronoun when ``p`` was the last subject."""
        return p.subj if p is self.last else p.name

    def whom(self, p: _Person) -> str:
        return p.obj if p is self.last else p.name

    def whose(self, p: _Person) -> str:
        return p.poss if p is self.last else p.owns

    def randint(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)


_Template = Callable[[_Ctx, _Qty, bool], _Step | None]


@dataclass(frozen=True)
class _TemplateSpec:
    name: str
    category: str
    kinds: tuple[str, ...]
    fn: _Template
    final_only: bool = False


def _registrar(specs: list[_TemplateSpec]) -> Callable[..., Callable[[_Template], _Template]]:
    """Return a ``@_template(category, *kinds, final_only=False)`` decorator adding to ``specs``.

    Each decorated step template is appended to ``specs`` in definition order, named after its
    function without the ``_t_`` prefix.
    """

    def _template(
        category: str, *kinds: str, final_only: bool = False
    ) -> Callable[[_Template], _Template]:
        def register(fn: _Template) -> _Template:
            name = fn.__name__.removeprefix("_t_")
            specs.append(_TemplateSpec(name, category, kinds, fn, final_only))
            return fn

        return register

    return _template


def _count(q: _Qty, value: Fraction, *, owner: _Person | None = None, **kw: object) -> _Qty:
    """A count result that keeps the noun and item of ``q`` unless told otherwise."""
    base = {"kind": "count", "owner": owner or q.owner, "noun": q.noun, "item": q.item}
    base.update(kw)
    return _Qty(value=value, ref="", **base)  # type: ignore[arg-type]


def _step(category: str, sentence: str, tokens: tuple[_Token, ...], value: Fraction,
          result: _Qty, explain: str, subgoal: str, subject: _Person | None = None,
          people: tuple[_Person, ...] = ()) -> _Step | None:
    if not _clean(value, result.kind):
        return None
    return _Step(category, sentence, tokens, value, replace(result, value=value), explain,
                 subgoal, subject, people)
