"""MathWord: an offline, seeded generator of multi-step word problems with GSM8K-style rationales.

A problem starts from one given quantity (``"Tom picks 24 apples."``) and applies ``level``
steps to it, each step one arithmetic operation described by one sentence (``"He gives 4
apples to Mia."``), and ends with a question about the last quantity. Each step kind is a
template with a category; the categories allowed widen with the level:

====== ================================================================================
level  categories
====== ================================================================================
1      ``add``, ``sub``
2      + ``mul`` (times as many, parts of each item, repeated purchases, days of work)
3      + ``div`` (sharing, packing, splitting a bill; always an integral or cent result)
4      + ``percent`` (discounts, tips, shares) and ``rate`` (unit prices, wages, speeds,
       fuel use, savings per week, minutes per item)
5      + ``compare`` (more/fewer/half as many as someone else, together, how many more)
====== ================================================================================

A level-``L`` problem has exactly ``L`` steps and, from level 2 on, at least one step of a
category that level introduces. Every value (intermediate ones included) is a positive integer,
or a money amount in whole cents.

Determinism: problem ``index`` of ``(seed, level)`` is drawn from
``random.Random(f"{seed}-{level}-{index}")``, so it never depends on how many other problems
are generated. The ``train`` and ``test`` splits (:meth:`MathWordGenerator.split`) are
disjoint by content: a problem belongs to ``test`` when the SHA-256 of its question text falls
in the test bucket (1 in 5), else to ``train``; a split walks the indices from 0 and keeps the
problems of its bucket, dropping repeated questions, so no question text is in both splits
whatever seeds they use.

A ``validation`` split, for choices made before a test run (the rounds of ``lumos-gym
improve``, learning rates), takes train-bucket questions, so it never shares one with
``test``; it walks the indices from :data:`VALIDATION_START`, which no train walk reaches, and
drops every question that is among the first :data:`VALIDATION_GUARD` train problems of the
same seed and level (more than any recipe here trains on), so it shares none with them either.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from fractions import Fraction

from lumos_gym.envs.tasks import Task
from lumos_gym.scoring.answers import normalize_number

__all__ = ["CATEGORIES", "LEVEL_CATEGORIES", "MathWordGenerator", "split_of", "template_names"]

CATEGORIES = ("add", "sub", "mul", "div", "percent", "rate", "compare")
"""Every step category, in the order levels introduce them."""

LEVEL_CATEGORIES: dict[int, tuple[str, ...]] = {
    1: ("add", "sub"),
    2: ("add", "sub", "mul"),
    3: ("add", "sub", "mul", "div"),
    4: ("add", "sub", "mul", "div", "percent", "rate"),
    5: CATEGORIES,
}
"""The categories a step may use at each level."""

_TEST_BUCKETS = 5  # one problem in five belongs to the test split
_MAX_VALUE = Fraction(100_000)
_ATTEMPTS = 200
_SPLITS = ("train", "validation", "test")
VALIDATION_START = 1_000_000
"""The first generator index of the ``validation`` split (train walks start at 0)."""
VALIDATION_GUARD = 2_000
"""How many of the first train problems of a seed and level validation questions avoid."""

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


_TEMPLATES: list[_TemplateSpec] = []


def _template(
    category: str, *kinds: str, final_only: bool = False
) -> Callable[[_Template], _Template]:
    def register(fn: _Template) -> _Template:
        name = fn.__name__.removeprefix("_t_")
        _TEMPLATES.append(_TemplateSpec(name, category, kinds, fn, final_only))
        return fn

    return register


def template_names() -> dict[str, list[str]]:
    """Return the step template names of each category (for documentation and tests).

    Returns:
        ``{category: [template name, ...]}`` for every category in :data:`CATEGORIES`.
    """
    out: dict[str, list[str]] = {c: [] for c in CATEGORIES}
    for spec in _TEMPLATES:
        out[spec.category].append(spec.name)
    return out


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


# --- add ---------------------------------------------------------------------------------------


@_template("add", "count")
def _t_buy_more(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    p, n = q.owner, c.randint(2, 25)
    many = q.noun[1]
    verb = q.item.get if q.item else ("gets", "get")
    return _step(
        "add", f"{c.who(p)} {p.v(*verb)} {n} more {many}.", (q, "+", str(n)), q.value + n,
        _count(q, Fraction(0), ask=f"How many {many} {p.does} {p.name} have now?",
               what=f"the number of {many} {p.name} {p.has} now"),
        f"{p.name} now {p.has} {{calc}} {many}.",
        f"Calculate the number of {many} {p.name} {p.has} after getting {n} more", p,
    )


@_template("add", "count")
def _t_gift(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    p, f, n = q.owner, c.friend(), c.randint(2, 20)
    many = q.noun[1]
    return _step(
        "add", f"{f.name} gives {c.whom(p)} {n} more {many}.", (q, "+", str(n)), q.value + n,
        _count(q, Fraction(0), ask=f"How many {many} {p.does} {p.name} have now?",
               what=f"the number of {many} {p.name} {p.has} after {f.owns} gift"),
        f"After the gift, {p.name} {p.has} {{calc}} {many}.",
        f"Calculate the number of {many} {p.name} {p.has} after {f.owns} gift", f, (f,),
    )


@_template("add", "cash")
def _t_earn(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    p, n, chore = q.owner, c.randint(5, 60), c.pick(_CHORES)
    return _step(
        "add", f"{c.who(p)} {p.v('earns', 'earn')} ${n} more by {chore}.", (q, "+", str(n)),
        q.value + n,
        replace(q, ask=f"How much money {p.does} {p.name} have now?",
                what=f"the money {p.name} {p.has} after {chore}", base=None),
        f"{p.name} now {p.has} {{calc}}.",
        f"Calculate how much money {p.name} {p.has} after {chore}", p,
    )


@_template("add", "cost")
def _t_fee(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    p, n, fee = q.owner, c.randint(2, 15), c.pick(_MEAL_FEES if q.meal else _SHOP_FEES)
    return _step(
        "add", f"There is also a ${n} {fee}.", (q, "+", str(n)), q.value + n,
        replace(q, ask=f"How much {p.does} {p.name} pay in total?",
                what=f"the total cost with the {fee}", base=None),
        f"With the {fee}, the total is {{calc}}.",
        f"Calculate the total cost including the {fee}", None,
    )


@_template("add", "hours")
def _t_more_hours(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    if not q.daily:
        return None
    p, n = q.owner, c.randint(1, max(1, min(6, 14 - int(q.value))))
    verb = ("works", "work") if q.activity == "work" else ("drives", "drive")
    return _step(
        "add", f"On Sunday, {c.he(p)} {p.v(*verb)} for {n} more {_HOURS[n != 1]} than on Saturday.",
        (q, "+", str(n)), q.value + n,
        replace(q, ask=f"How many hours {p.does} {p.name} {verb[1]} on Sunday?",
                what=f"the number of hours {p.name} {p.v(*verb)} on Sunday", base=None),
        f"On Sunday {p.name} {p.v(*verb)} for {{calc}} hours.",
        f"Calculate the number of hours {p.name} {p.v(*verb)} on Sunday", p,
    )


@_template("add", "minutes")
def _t_cleanup(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    p, n = q.owner, c.randint(5, 30)
    return _step(
        "add", f"{c.who(p)} also {p.v('spends', 'spend')} {n} minutes cleaning up afterwards.",
        (q, "+", str(n)), q.value + n,
        replace(q, ask=f"How many minutes {p.does} {p.name} spend in total?",
                what=f"the total time {p.name} {p.v('spends', 'spend')}", base=None),
        f"In total {p.name} {p.v('spends', 'spend')} {{calc}} minutes.",
        f"Calculate the total number of minutes {p.name} {p.v('spends', 'spend')}", p,
    )


# --- sub ---------------------------------------------------------------------------------------


@_template("sub", "count")
def _t_give_away(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    if q.value < 2:
        return None
    p, f = q.owner, c.friend()
    n, many = c.randint(1, min(int(q.value) - 1, 40)), q.noun[1]
    return _step(
        "sub", f"{c.who(p)} {p.v('gives', 'give')} {_plural(n, q.noun)} to {f.name}.",
        (q, "-", str(n)), q.value - n,
        _count(q, Fraction(0), ask=f"How many {many} {p.does} {p.name} have left?",
               what=f"the number of {many} {p.name} {p.has} left"),
        f"{p.name} {p.has} {{calc}} {many} left.",
        f"Calculate the number of {many} {p.name} {p.has} left after giving some to {f.name}",
        p, (f,),
    )


@_template("sub", "count")
def _t_sell_some(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    if q.value < 2:
        return None
    p, place = q.owner, c.pick(_PLACES)
    n, many = c.randint(1, min(int(q.value) - 1, 40)), q.noun[1]
    return _step(
        "sub", f"{c.who(p)} {p.v('sells', 'sell')} {n} of the {many} at the {place}.",
        (q, "-", str(n)), q.value - n,
        _count(q, Fraction(0), ask=f"How many {many} {p.does} {p.name} have left?",
               what=f"the number of {many} {p.name} {p.has} left after the {place}"),
        f"After selling some, {p.name} {p.has} {{calc}} {many} left.",
        f"Calculate the number of {many} {p.name} {p.has} left after selling {n}", p,
    )


@_template("sub", "count")
def _t_damaged(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    if q.value < 3:
        return None
    p = q.owner
    n, many = c.randint(2, min(int(q.value) - 1, 12)), q.noun[1]
    if q.item and q.item.edible and q.noun == (q.item.one, q.item.many):
        who = c.who(p) if p.plural else f"{c.who(p)} and {p.poss} family"
        sentence = f"{who} eat {n} of them."
        why = "eating some"
    else:
        sentence = (f"{c.who(p)} {p.v('finds', 'find')} that {n} of the {many} are damaged and "
                    f"{p.v('throws', 'throw')} them away.")
        why = "throwing away the damaged ones"
    return _step(
        "sub", sentence, (q, "-", str(n)), q.value - n,
        _count(q, Fraction(0), ask=f"How many {many} {p.does} {p.name} have left?",
               what=f"the number of {many} {p.name} {p.has} left"),
        f"{p.name} {p.has} {{calc}} {many} left.",
        f"Calculate the number of {many} {p.name} {p.has} left after {why}", p,
    )


@_template("sub", "cash")
def _t_spend(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    if q.value < 3:
        return None
    p, thing = q.owner, c.pick(_SMALL_BUYS)
    n = c.randint(1, min(int(q.value) - 1, 60))
    return _step(
        "sub", f"{c.who(p)} {p.v('spends', 'spend')} ${n} on {thing}.", (q, "-", str(n)),
        q.value - n,
        replace(q, ask=f"How much money {p.does} {p.name} have left?",
                what=f"the money {p.name} {p.has} left", base=None),
        f"{p.name} {p.has} {{calc}} left.",
        f"Calculate how much money {p.name} {p.has} left after buying {thing}", p,
    )


@_template("sub", "cost")
def _t_coupon(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    if q.value < 4:
        return None
    p = q.owner
    n = c.randint(1, min(int(q.value) // 2, 25))
    return _step(
        "sub", f"{c.who(p)} {p.v('uses', 'use')} a ${n} coupon.", (q, "-", str(n)), q.value - n,
        replace(q, ask=f"How much {p.does} {p.name} pay after using the coupon?",
                what="the cost after the coupon", base=None),
        f"With the coupon, {p.name} {p.v('pays', 'pay')} {{calc}}.",
        f"Calculate the cost after the ${n} coupon", p,
    )


@_template("sub", "cost", final_only=True)
def _t_pay_with_bill(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    p = q.owner
    bill = next((b for b in (5, 10, 20, 50, 100) if b > q.value), None)
    if bill is None:
        bill = (int(q.value) // 100 + 1) * 100
        paid = f"${bill} in cash"
    else:
        paid = f"a ${bill} bill"
    return _step(
        "sub", f"{c.who(p)} {p.v('pays', 'pay')} with {paid}.", (str(bill), "-", q),
        bill - q.value,
        _Qty(Fraction(0), "cash", "", p, ask=f"How much change {p.does} {p.name} get back?",
             what=f"the change {p.name} {p.v('gets', 'get')}"),
        f"{p.name} {p.v('gets', 'get')} {{calc}} in change.",
        f"Calculate the change {p.name} {p.v('gets', 'get')} from ${bill}", p,
    )


# --- mul ---------------------------------------------------------------------------------------


@_template("mul", "count")
def _t_times_as_many(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    p, f, k = q.owner, c.friend(), c.randint(2, 6)
    many = q.noun[1]
    times = "twice" if k == 2 else f"{k} times"
    return _step(
        "mul", f"{f.name} has {times} as many {many} as {p.name}.",
        (q, "*", str(k)), q.value * k,
        _count(q, Fraction(0), owner=f, base=q, ask=f"How many {many} does {f.name} have?",
               what=f"the number of {many} {f.name} has"),
        f"{f.name} has {{calc}} {many}.",
        f"Calculate the number of {many} {f.name} has", f, (f,),
    )


@_template("mul", "count")
def _t_parts(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    if q.item is None or q.item.part is None or q.noun != (q.item.one, q.item.many):
        return None
    p = q.owner
    one, many, low, high = q.item.part
    k = c.randint(low, high)
    return _step(
        "mul", f"Each {q.item.one} has {k} {many}.", (q, "*", str(k)), q.value * k,
        _count(q, Fraction(0), noun=(one, many), item=None,
               ask=f"How many {many} {p.does} {p.name} have in all?",
               what=f"the number of {many} {p.name} {p.has}"),
        f"There are {{calc}} {many} in all.",
        f"Calculate the total number of {many}", None,
    )


@_template("mul", "count")
def _t_collection_grows(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    if q.item is None or not q.item.collectible:
        return None
    p, k = q.owner, c.randint(2, 3)
    grows = "doubles" if k == 2 else "triples"
    many = q.noun[1]
    return _step(
        "mul", f"By the end of the year, {c.whose(p)} collection of {many} {grows}.",
        (q, "*", str(k)), q.value * k,
        _count(q, Fraction(0), what=f"the number of {many} {p.name} {p.has} at the end of the year",
               ask=f"How many {many} {p.does} {p.name} have at the end of the year?"),
        f"At the end of the year {p.name} {p.has} {{calc}} {many}.",
        f"Calculate the size of {p.owns} collection at the end of the year", None,
    )


@_template("mul", "cost")
def _t_repeat_order(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    if q.purchase:
        return None
    p, k = q.owner, c.randint(2, 8)
    verb, thing = (p.v("orders", "order"), "meal") if q.meal else (p.v("buys", "buy"), "order")
    return _step(
        "mul", f"{c.who(p)} {verb} the same {thing} every week for {k} weeks.",
        (q, "*", str(k)), q.value * k,
        replace(q, ask=f"How much {p.does} {p.name} spend in {k} weeks?",
                what=f"the amount {p.name} {p.v('spends', 'spend')} in {k} weeks", base=None),
        f"In {k} weeks {p.name} {p.v('spends', 'spend')} {{calc}}.",
        f"Calculate how much {p.name} {p.v('spends', 'spend')} in {k} weeks", p,
    )


@_template("mul", "cash")
def _t_times_as_much(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    p, f, k = q.owner, c.friend(), c.randint(2, 5)
    times = "twice" if k == 2 else f"{k} times"
    return _step(
        "mul", f"{f.name} has {times} as much money as {p.name}.", (q, "*", str(k)), q.value * k,
        _Qty(Fraction(0), "cash", "", f, base=q, ask=f"How much money does {f.name} have?",
             what=f"the money {f.name} has"),
        f"{f.name} has {{calc}}.",
        f"Calculate how much money {f.name} has", f, (f,),
    )


@_template("mul", "hours")
def _t_days(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    if not q.daily:
        return None
    p, k = q.owner, c.randint(2, 6)
    verb = ("works", "work") if q.activity == "work" else ("drives", "drive")
    return _step(
        "mul", f"{c.who(p)} {p.v(*verb)} the same number of hours on each of the next {k} days.",
        (q, "*", str(k)), q.value * k,
        replace(q, ask=f"How many hours {p.does} {p.name} {verb[1]} on those {k} days?",
                what=f"the number of hours {p.name} {p.v(*verb)} in {k} days", base=None,
                daily=False),
        f"In {k} days {p.name} {p.v(*verb)} {{calc}} hours.",
        f"Calculate the number of hours {p.name} {p.v(*verb)} in {k} days", p,
    )


# --- div ---------------------------------------------------------------------------------------


def _divisors(value: Fraction, low: int, high: int) -> list[int]:
    n = int(value) if value.denominator == 1 else 0
    return [k for k in range(low, high + 1) if n and n % k == 0 and n // k >= 1]


@_template("div", "count", final_only=True)
def _t_share(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    options = _divisors(q.value, 2, 12)
    if not options:
        return None
    p, k, many = q.owner, c.pick([str(d) for d in options]), q.noun[1]
    return _step(
        "div", f"{c.who(p)} {p.v('shares', 'share')} the {many} equally among {k} friends.",
        (q, "/", k), q.value / int(k),
        _count(q, Fraction(0), ask=f"How many {many} does each friend get?",
               what=f"the number of {many} each friend gets"),
        f"Each friend gets {{calc}} {many}.",
        f"Calculate the number of {many} each friend gets", p,
    )


@_template("div", "count")
def _t_pack(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    if q.item is None:
        return None
    options = _divisors(q.value, 2, 24)
    options = [d for d in options if q.value // d >= 2]
    if not options:
        return None
    p, k = q.owner, c.pick([str(d) for d in options])
    box_one, box_many = q.item.pack
    return _step(
        "div", f"{c.who(p)} {p.v('packs', 'pack')} them into {box_many} of {k}.", (q, "/", k),
        q.value / int(k),
        _count(q, Fraction(0), noun=(box_one, box_many), item=None,
               ask=f"How many {box_many} {p.does} {p.name} fill?",
               what=f"the number of {box_many} {p.name} {p.v('fills', 'fill')}"),
        f"{p.name} {p.v('fills', 'fill')} {{calc}} {box_many}.",
        f"Calculate the number of {box_many} {p.name} {p.v('fills', 'fill')}", p,
    )


@_template("div", "cost")
def _t_split_bill(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    if q.purchase:
        return None
    options = [k for k in range(2, 9) if (q.value * 100 / k).denominator == 1]
    if not options:
        return None
    p, k = q.owner, c.pick([str(d) for d in options])
    others = int(k) - 1
    friends = "a friend" if others == 1 else f"{others} friends"
    return _step(
        "div", f"{c.who(p)} {p.v('splits', 'split')} the cost equally with {friends}.",
        (q, "/", k), q.value / int(k),
        replace(q, ask="How much does each person pay?", what="each person's share", base=None),
        "Each person pays {calc}.",
        "Calculate each person's share of the cost", p,
    )


@_template("div", "cash", final_only=True)
def _t_envelopes(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    options = [k for k in range(2, 11) if (q.value * 100 / k).denominator == 1]
    if not options:
        return None
    p, k = q.owner, c.pick([str(d) for d in options])
    return _step(
        "div", f"{c.who(p)} {p.v('divides', 'divide')} the money equally into {k} envelopes.",
        (q, "/", k), q.value / int(k),
        replace(q, ask="How much money goes into each envelope?",
                what="the money in each envelope", base=None),
        "Each envelope gets {calc}.",
        "Calculate the amount of money in each envelope", p,
    )


@_template("div", "minutes", final_only=True)
def _t_to_hours(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    if q.value % 15:
        return None
    p = q.owner
    return _step(
        "div", "", (q, "/", "60"), q.value / 60,
        replace(q, kind="hours", ask=f"How many hours {p.does} {p.name} spend in total?",
                what=f"the number of hours {p.name} {p.v('spends', 'spend')}", base=None),
        "That is {calc} hours.",
        "Convert the total time from minutes to hours", None,
    )


# --- percent -----------------------------------------------------------------------------------


def _percents(value: Fraction, choices: tuple[int, ...], kind: str, *, keep: bool) -> list[int]:
    """The percentages p for which ``value * p%`` (or the rest, with ``keep``) is clean."""
    out = []
    for p in choices:
        share = value * (100 - p if keep else p) / 100
        if _clean(share, kind):
            out.append(p)
    return out


@_template("percent", "count")
def _t_percent_kind(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    if q.item is None or q.noun != (q.item.one, q.item.many):
        return None
    options = _percents(q.value, (10, 20, 25, 40, 50, 60, 75, 80), "count", keep=False)
    if not options:
        return None
    p, pct, adj = q.owner, c.pick([str(x) for x in options]), c.pick(q.item.kinds)
    one, many = f"{adj} {q.item.one}", f"{adj} {q.item.many}"
    return _step(
        "percent", f"{pct}% of the {q.item.many} are {adj}.", (q, "*", pct, "/", "100"),
        q.value * int(pct) / 100,
        _count(q, Fraction(0), noun=(one, many),
               ask=f"How many {many} {p.does} {p.name} have?",
               what=f"the number of {many} {p.name} {p.has}"),
        f"{p.name} {p.has} {{calc}} {many}.",
        f"Calculate the number of {many}", None,
    )


@_template("percent", "count")
def _t_sell_percent(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    options = _percents(q.value, (10, 20, 25, 40, 50, 60, 75), "count", keep=True)
    if not options:
        return None
    p, pct, many = q.owner, c.pick([str(x) for x in options]), q.noun[1]
    return _step(
        "percent", f"{c.who(p)} {p.v('sells', 'sell')} {pct}% of them.",
        (q, "*", "(", "100", "-", pct, ")", "/", "100"), q.value * (100 - int(pct)) / 100,
        _count(q, Fraction(0), ask=f"How many {many} {p.does} {p.name} have left?",
               what=f"the number of {many} {p.name} {p.has} left"),
        f"{p.name} {p.v('keeps', 'keep')} {100 - int(pct)}% of them, which is {{calc}} {many}.",
        f"Calculate the number of {many} left after selling {pct}% of them", p,
    )


@_template("percent", "cost")
def _t_discount(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    options = _percents(q.value, (5, 10, 15, 20, 25, 30, 40, 50), "cost", keep=True)
    if not options:
        return None
    p, pct = q.owner, c.pick([str(x) for x in options])
    if q.purchase:
        sentence = f"It is on sale for {pct}% off."
    elif q.meal:
        sentence = f"{c.who(p)} {p.v('has', 'have')} a voucher for {pct}% off the bill."
    else:
        sentence = f"The store gives {c.whom(p)} a {pct}% discount."
    return _step(
        "percent", sentence, (q, "*", "(", "100", "-", pct, ")", "/", "100"),
        q.value * (100 - int(pct)) / 100,
        replace(q, ask=f"How much {p.does} {p.name} pay after the discount?",
                what="the price after the discount", base=None),
        f"After the {pct}% discount the price is {{calc}}.",
        f"Calculate the price after the {pct}% discount", None,
    )


@_template("percent", "cost")
def _t_tip(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    options = _percents(q.value, (5, 10, 15, 20, 25), "cost", keep=False)
    options = [x for x in options if _clean(q.value * (100 + x) / 100, "cost")]
    if not options:
        return None
    p, pct = q.owner, c.pick([str(x) for x in options])
    what = c.pick(("tip", "sales tax")) if q.meal else "sales tax"
    sentence = (f"{c.who(p)} {p.v('adds', 'add')} a {pct}% tip." if what == "tip"
                else f"A {pct}% sales tax is added.")
    return _step(
        "percent", sentence, (q, "*", "(", "100", "+", pct, ")", "/", "100"),
        q.value * (100 + int(pct)) / 100,
        replace(q, ask=f"How much {p.does} {p.name} pay in total?",
                what=f"the total with the {what}", base=None),
        f"With the {pct}% {what} the total is {{calc}}.",
        f"Calculate the total including the {pct}% {what}", None,
    )


@_template("percent", "cash")
def _t_save_percent(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    options = _percents(q.value, (10, 20, 25, 30, 40, 50), "cash", keep=False)
    if not options:
        return None
    p, pct = q.owner, c.pick([str(x) for x in options])
    return _step(
        "percent", f"{c.who(p)} {p.v('puts', 'put')} {pct}% of the money into a savings account.",
        (q, "*", pct, "/", "100"), q.value * int(pct) / 100,
        replace(q, ask=f"How much money {p.does} {p.name} put into savings?",
                what=f"the money {p.name} {p.v('saves', 'save')}", base=None),
        f"{p.name} {p.v('saves', 'save')} {{calc}}.",
        f"Calculate the amount {p.name} {p.v('puts', 'put')} into savings", p,
    )


# --- rate --------------------------------------------------------------------------------------


def _price(c: _Ctx, q: _Qty) -> Fraction | None:
    """A unit price for what ``q`` counts: the item's own prices, or a container's."""
    if q.item is not None:
        return Fraction(c.pick(q.item.prices))
    if q.noun[0] in {item.pack[0] for item in _ITEMS}:
        return Fraction(c.pick(("3", "4", "5", "6", "8", "10", "12")))
    return None


@_template("rate", "count")
def _t_unit_price(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    price = _price(c, q)
    if price is None:
        return None
    p, (one, many) = q.owner, q.noun
    if q.item is not None and q.item.get[0] in ("buys", "orders"):
        sentence = f"Each {one} costs {_money(price)}."
        ask = f"How much do the {many} cost in total?"
        explain, what = f"The {many} cost {{calc}}.", f"the total cost of the {many}"
    elif not last:
        return None  # a value is not money to spend: only a final question may ask for it
    else:
        sentence = f"Each {one} is worth {_money(price)}."
        ask, explain = f"How much are the {many} worth in total?", f"The {many} are worth {{calc}}."
        what = f"the total value of the {many}"
    return _step(
        "rate", sentence, (q, "*", _fmt(price)), q.value * price,
        _Qty(Fraction(0), "cost", "", p, ask=ask, what=what),
        explain, f"Calculate {what}", None,
    )


@_template("rate", "count")
def _t_sell_each(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    price = _price(c, q)
    if price is None:
        return None
    p, (one, _many) = q.owner, q.noun
    return _step(
        "rate", f"{c.who(p)} {p.v('sells', 'sell')} each {one} for {_money(price)}.",
        (q, "*", _fmt(price)), q.value * price,
        _Qty(Fraction(0), "cash", "", p, ask=f"How much money {p.does} {p.name} make?",
             what=f"the money {p.name} {p.v('makes', 'make')}"),
        f"{p.name} {p.v('makes', 'make')} {{calc}}.",
        f"Calculate the money {p.name} {p.v('makes', 'make')} from selling them", p,
    )


@_template("rate", "cash")
def _t_spend_on_items(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    item = c.rng.choice(_ITEMS)
    prices = [Fraction(x) for x in item.prices if (q.value / Fraction(x)).denominator == 1]
    if not prices:
        return None
    p, price = q.owner, c.rng.choice(prices)
    return _step(
        "rate", f"{c.who(p)} {p.v('spends', 'spend')} all of it on {item.many} that cost "
        f"{_money(price)} each.", (q, "/", _fmt(price)), q.value / price,
        _Qty(Fraction(0), "count", "", p, noun=(item.one, item.many), item=item,
             ask=f"How many {item.many} {p.does} {p.name} buy?",
             what=f"the number of {item.many} {p.name} {p.v('buys', 'buy')}"),
        f"{p.name} {p.v('buys', 'buy')} {{calc}} {item.many}.",
        f"Calculate the number of {item.many} {p.name} can buy", p,
    )


@_template("rate", "cost", final_only=True)
def _t_save_weekly(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    options = [s for s in (5, 8, 10, 12, 15, 20, 25, 30, 40, 50) if (q.value / s).denominator == 1]
    options = [s for s in options if 2 <= q.value / s <= 52]
    if not options:
        return None
    p, s = q.owner, c.rng.choice(options)
    return _step(
        "rate", f"{c.who(p)} {p.v('saves', 'save')} ${s} every week.", (q, "/", str(s)),
        q.value / s,
        _Qty(Fraction(0), "weeks", "", p,
             ask=f"How many weeks {p.does} {p.name} need to save to pay for it?",
             what=f"the number of weeks {p.name} {p.v('needs', 'need')} to save"),
        f"{p.name} {p.v('needs', 'need')} to save for {{calc}} weeks.",
        f"Calculate the number of weeks {p.name} {p.v('needs', 'need')} to save", p,
    )


@_template("rate", "hours")
def _t_wage(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    if q.activity != "work":
        return None
    p = q.owner
    wage = Fraction(c.pick(("9", "10", "12", "12.5", "14", "15", "16", "18", "20", "22.5")))
    return _step(
        "rate", f"{c.who(p)} {p.v('earns', 'earn')} {_money(wage)} per hour.",
        (q, "*", _fmt(wage)), q.value * wage,
        _Qty(Fraction(0), "cash", "", p, ask=f"How much money {p.does} {p.name} earn?",
             what=f"the money {p.name} {p.v('earns', 'earn')}"),
        f"{p.name} {p.v('earns', 'earn')} {{calc}}.",
        f"Calculate how much {p.name} {p.v('earns', 'earn')}", p,
    )


@_template("rate", "hours")
def _t_speed(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    if q.activity != "drive":
        return None
    p, speed = q.owner, c.rng.choice((30, 40, 45, 50, 55, 60, 65))
    return _step(
        "rate", f"{c.who(p)} {p.v('drives', 'drive')} at {speed} miles per hour.",
        (q, "*", str(speed)), q.value * speed,
        _Qty(Fraction(0), "miles", "", p, ask=f"How many miles {p.does} {p.name} drive?",
             what=f"the distance {p.name} {p.v('drives', 'drive')}"),
        f"{p.name} {p.v('drives', 'drive')} {{calc}} miles.",
        f"Calculate the distance {p.name} {p.v('drives', 'drive')}", p,
    )


@_template("rate", "miles")
def _t_fuel(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    options = [m for m in (15, 20, 25, 30, 35, 40, 45) if (q.value / m).denominator == 1]
    if not options:
        return None
    p, mpg = q.owner, c.rng.choice(options)
    return _step(
        "rate", f"{_cap(c.whose(p))} car uses 1 gallon of gas for every {mpg} miles.",
        (q, "/", str(mpg)), q.value / mpg,
        _Qty(Fraction(0), "gallons", "", p, ask=f"How many gallons of gas {p.does} {p.name} use?",
             what=f"the gas {p.name} {p.v('uses', 'use')}"),
        "The trip uses {calc} gallons of gas.",
        "Calculate the number of gallons of gas used", None,
    )


@_template("rate", "gallons")
def _t_gas_price(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    p, price = q.owner, Fraction(c.pick(("3", "3.25", "3.5", "3.75", "4", "4.5")))
    return _step(
        "rate", f"Gas costs {_money(price)} per gallon.", (q, "*", _fmt(price)), q.value * price,
        _Qty(Fraction(0), "cost", "", p, ask=f"How much {p.does} {p.name} spend on gas?",
             what=f"the cost of the gas {p.name} {p.v('uses', 'use')}"),
        "The gas costs {calc}.",
        "Calculate the cost of the gas", None,
    )


@_template("rate", "count")
def _t_minutes_each(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    if q.item is None or q.value > 200:
        return None
    p, m = q.owner, c.randint(2, 12)
    quarter = [k for k in range(2, 16) if q.value * k % 15 == 0]
    if quarter and c.rng.random() < 0.5:
        m = c.rng.choice(quarter)  # a whole number of quarter hours, for a conversion to hours
    verb, gerund = q.item.chore
    one, many = q.noun
    return _step(
        "rate", f"It takes {c.whom(p)} {m} minutes to {verb} each {one}.", (q, "*", str(m)),
        q.value * m,
        _Qty(Fraction(0), "minutes", "", p,
             ask=f"How many minutes {p.does} {p.name} spend {gerund} the {many}?",
             what=f"the time {p.name} {p.v('spends', 'spend')} {gerund} the {many}"),
        f"{p.name} {p.v('spends', 'spend')} {{calc}} minutes {gerund} the {many}.",
        f"Calculate the time {p.name} {p.v('spends', 'spend')} {gerund} the {many}", None,
    )


@_template("rate", "hours")
def _t_make_per_hour(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    if q.activity != "work" or q.place not in _PRODUCTS:
        return None
    item = c.rng.choice([i for i in _ITEMS if i.one in _PRODUCTS[q.place]])
    p, r = q.owner, c.randint(3, 15)
    return _step(
        "rate", f"{c.who(p)} {p.v(*item.get)} {r} {item.many} per hour.", (q, "*", str(r)),
        q.value * r,
        _Qty(Fraction(0), "count", "", p, noun=(item.one, item.many), item=item,
             ask=f"How many {item.many} {p.does} {p.name} {item.get[1]}?",
             what=f"the number of {item.many} {p.name} {p.v(*item.get)}"),
        f"{p.name} {p.v(*item.get)} {{calc}} {item.many}.",
        f"Calculate the number of {item.many} {p.name} {p.v(*item.get)}", p,
    )


# --- compare -----------------------------------------------------------------------------------


@_template("compare", "count", "cash", "hours")
def _t_more_than(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    p, f = q.owner, c.friend()
    fewer = c.rng.random() < 0.5 and q.value > 3
    top = 30 if q.kind != "hours" else 5 if not q.daily else max(1, min(5, 14 - int(q.value)))
    n = c.randint(1, min(int(q.value) - 1, top)) if fewer else c.randint(1, top)
    word = "fewer" if fewer else "more"
    if q.kind == "count":
        many = q.noun[1]
        sentence = f"{f.name} has {n} {word} {q.noun[0] if n == 1 else many} than {p.name}."
        ask, explain = f"How many {many} does {f.name} have?", f"{f.name} has {{calc}} {many}."
        what = f"the number of {many} {f.name} has"
    elif q.kind == "cash":
        word = "less" if fewer else "more"
        sentence = f"{f.name} has ${n} {word} than {p.name}."
        ask, explain = f"How much money does {f.name} have?", f"{f.name} has {{calc}}."
        what = f"the money {f.name} has"
    else:
        verb = ("works", "work") if q.activity == "work" else ("drives", "drive")
        sentence = f"{f.name} {verb[0]} {n} {word} {_HOURS[n != 1]} than {p.name}."
        ask = f"How many hours does {f.name} {verb[1]}?"
        explain = f"{f.name} {verb[0]} {{calc}} hours."
        what = f"the number of hours {f.name} {verb[0]}"
    return _step(
        "compare", sentence, (q, "-" if fewer else "+", str(n)),
        q.value - n if fewer else q.value + n,
        replace(q, owner=f, base=q, ask=ask, what=what),
        explain, f"Calculate {what}", f, (f,),
    )


@_template("compare", "count")
def _t_half_as_many(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    if q.value % 2:
        return None
    p, f, many = q.owner, c.friend(), q.noun[1]
    return _step(
        "compare", f"{f.name} has half as many {many} as {p.name}.", (q, "/", "2"), q.value / 2,
        _count(q, Fraction(0), owner=f, base=q, ask=f"How many {many} does {f.name} have?",
               what=f"the number of {many} {f.name} has"),
        f"{f.name} has {{calc}} {many}.",
        f"Calculate the number of {many} {f.name} has", f, (f,),
    )


def _group(a: _Person, b: _Person) -> _Person:
    return _Person(f"{a.name} and {b.name}", "they", "them", "their", plural=True)


@_template("compare", "count", "cash")
def _t_together(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    b = q.base
    if b is None or b.kind != q.kind or b.noun != q.noun or b.owner.plural or q.owner.plural:
        return None
    both = _group(b.owner, q.owner)
    if q.kind == "count":
        many = q.noun[1]
        sentence = "" if last else f"{both.name} put all their {many} together."
        ask = f"How many {many} do {both.name} have together?"
        explain = f"Together they have {{calc}} {many}."
    else:
        sentence = "" if last else f"{both.name} put their money together."
        ask = f"How much money do {both.name} have together?"
        explain = "Together they have {calc}."
    return _step(
        "compare", sentence, (b, "+", q), b.value + q.value,
        replace(q, owner=both, base=None, ask=ask, what=f"the amount {both.name} have together"),
        explain, f"Calculate the total of {b.owner.owns} and {q.owner.owns} amounts", both,
    )


@_template("compare", "count", "cash", "hours", final_only=True)
def _t_difference(c: _Ctx, q: _Qty, last: bool) -> _Step | None:
    b = q.base
    if b is None or b.kind != q.kind or b.noun != q.noun or b.value == q.value:
        return None
    big, small = (q, b) if q.value > b.value else (b, q)
    if q.kind == "count":
        ask = f"How many more {q.noun[1]} does {big.owner.name} have than {small.owner.name}?"
        unit = f" {q.noun[1]}"
    elif q.kind == "cash":
        ask = f"How much more money does {big.owner.name} have than {small.owner.name}?"
        unit = ""
    else:
        verb = "work" if q.activity == "work" else "drive"
        ask = f"How many more hours does {big.owner.name} {verb} than {small.owner.name}?"
        unit = " hours"
    return _step(
        "compare", "", (big, "-", small), big.value - small.value,
        replace(q, ask=ask, what="the difference", base=None),
        f"{big.owner.name} has {{calc}}{unit} more than {small.owner.name}.",
        f"Calculate how much more {big.owner.name} has than {small.owner.name}", None,
    )


# ---------------------------------------------------------------------------------------------
# Starting quantities


def _start(c: _Ctx) -> tuple[str, _Qty]:
    p = c.rng.choice(_PEOPLE)
    c.used.append(p)
    kind = c.pick(("count", "count", "count", "cash", "cash", "cost", "cost", "hours"))
    lead = c.pick(_STARTS)
    if kind == "count":
        item = c.rng.choice(_ITEMS)
        a = c.randint(6, 60) if item.part is None else c.randint(2, 12)
        verb = c.pick((item.get[0], "has"))
        sentence = f"{lead if verb != 'has' else ''}{p.name} {verb} {a} {item.many}."
        qty = _Qty(Fraction(a), "count", str(a), p, (item.one, item.many), item,
                   what=f"the number of {item.many} {p.name} has")
    elif kind == "cash":
        a = c.randint(12, 200)
        sentence = c.pick((f"{p.name} has ${a} in {p.poss} wallet.",
                           f"{p.name} gets ${a} for {p.poss} birthday.",
                           f"{p.name} has saved ${a}."))
        qty = _Qty(Fraction(a), "cash", str(a), p, what=f"the money {p.name} has")
    elif kind == "cost":
        if c.rng.random() < 0.5:
            thing = c.pick(_BIG_BUYS)
            a = c.randint(4, 60) * 5
            sentence = f"{p.name} wants to buy a {thing} that costs ${a}."
            qty = _Qty(Fraction(a), "cost", str(a), p, what=f"the price of the {thing}",
                       purchase=True)
        else:
            a = Fraction(c.randint(24, 240), 2)
            sentence = c.pick((f"The bill for {p.owns} dinner is {_money(a)}.",
                               f"{p.name} orders food that costs {_money(a)}."))
            qty = _Qty(a, "cost", _fmt(a), p, what="the cost of the meal", meal=True)
    else:
        activity = c.pick(("work", "drive"))
        a = c.randint(2, 9)
        if activity == "work":
            place = c.pick(_WORKPLACES)
            sentence = f"{p.name} works {a} hours at the {place} on Saturday."
        else:
            place = ""
            sentence = f"{p.name} drives for {a} hours on Saturday."
        qty = _Qty(Fraction(a), "hours", str(a), p, activity=activity, place=place, daily=True,
                   what=f"the hours {p.name} spends on Saturday")
    return sentence, qty


# ---------------------------------------------------------------------------------------------
# Assembling a problem


@dataclass(frozen=True)
class _Problem:
    question: str
    answer: str
    rationale: str
    actions: tuple[str, ...]
    steps: tuple[dict[str, str], ...]
    categories: tuple[str, ...]
    templates: tuple[str, ...]


def _choose_step(c: _Ctx, q: _Qty, cats: tuple[str, ...], last: bool) -> _Step | None:
    specs = [
        s for s in _TEMPLATES
        if s.category in cats and q.kind in s.kinds and (last or not s.final_only)
    ]
    c.rng.shuffle(specs)
    for spec in specs:
        if spec.name in c.templates:
            continue  # one use of each template per problem keeps the story varied
        step = spec.fn(c, q, last)
        if step is not None:
            c.templates.add(spec.name)
            return replace(step, template=spec.name)
    return None


def _try_build(c: _Ctx, level: int) -> _Problem | None:
    sentence, q = _start(c)
    c.last = q.owner
    allowed = LEVEL_CATEGORIES[level]
    new = tuple(x for x in allowed if x not in LEVEL_CATEGORIES.get(level - 1, ()))
    force_at = c.rng.randrange(level)
    sentences, lines, actions, steps, cats, names = [sentence], [], [], [], [], []
    for i in range(level):
        last = i == level - 1
        step = _choose_step(c, q, new if i == force_at else allowed, last)
        if step is None:
            return None
        if step.sentence:
            sentences.append(step.sentence)
        k = i + 1
        result = replace(step.result, ref=f"R{k}")
        action_expr = _render(step.tokens, lambda t: t.ref, " ")
        calc = _render(step.tokens, lambda t: _fmt(t.value), "")
        shown = _render(step.tokens, lambda t: _fmt(t.value), " ")
        if _evaluate(calc) != step.value:  # pragma: no cover - a template bug
            raise AssertionError(f"template arithmetic is wrong: {calc} != {step.value}")
        dollar = "$" if result.money else ""
        value = _fmt(step.value)
        lines.append(step.explain.format(calc=f"{shown} = {dollar}<<{calc}={value}>>{value}"))
        action = f"R{k} = Calculator({action_expr})"
        actions.append(action)
        steps.append({"subgoal": step.subgoal, "action": action, "value": value})
        cats.append(step.category)
        names.append(step.template)
        c.used.extend(x for x in step.people if x not in c.used)
        c.last = step.subject
        q = result
    if level > 1 and not set(cats) & set(new):
        return None
    answer = _fmt(q.value)
    sentences.append(q.ask)
    lines.append(f"#### {answer}")
    actions.append(f"Answer(R{level})")
    return _Problem(" ".join(sentences), answer, "\n".join(lines), tuple(actions), tuple(steps),
                    tuple(cats), tuple(names))


def split_of(question: str) -> str:
    """Return the split (``"train"`` or ``"test"``) a MathWord question belongs to.

    Args:
        question: the question text.

    Returns:
        ``"test"`` for one question in five (by SHA-256 of the text), else ``"train"``.
    """
    digest = hashlib.sha256(question.encode("utf-8")).digest()
    return "test" if int.from_bytes(digest[:4], "big") % _TEST_BUCKETS == 0 else "train"


class MathWordGenerator:
    """Seeded generator of multi-step arithmetic word problems (see the module docstring).

    Examples:
        >>> gen = MathWordGenerator()
        >>> task = gen.problem(0, seed=0, level=2)
        >>> task.id, len(task.gold_actions)
        ('mathword/L2/0/0', 3)
    """

    levels = tuple(LEVEL_CATEGORIES)

    def problem(self, index: int, *, seed: int, level: int) -> Task:
        """Generate problem ``index`` of ``(seed, level)``.

        Args:
            index: the problem index (non-negative).
            seed: the seed.
            level: difficulty 1..5 (the number of steps).

        Returns:
            A task with id ``mathword/L{level}/{seed}/{index}``, a GSM8K-style rationale,
            one ``R<k> = Calculator(...)`` action per step and a final ``Answer(R{level})``;
            ``meta["steps"]`` lists ``{"subgoal", "action", "value"}`` per step.

        Raises:
            ValueError: a level outside 1..5 or a negative index.
        """
        if level not in LEVEL_CATEGORIES:
            raise ValueError(f"level must be one of {self.levels}, got {level!r}")
        if index < 0:
            raise ValueError(f"index must be >= 0, got {index}")
        rng = random.Random(f"{seed}-{level}-{index}")
        for _ in range(_ATTEMPTS):
            problem = _try_build(_Ctx(rng), level)
            if problem is not None:
                break
        else:  # pragma: no cover - every level has templates for every start
            raise RuntimeError(f"could not generate a level-{level} problem for index {index}")
        return Task(
            id=f"mathword/L{level}/{seed}/{index}",
            question=problem.question,
            answer=problem.answer,
            task_type="math",
            rationale=problem.rationale,
            gold_actions=problem.actions,
            meta={
                "dataset": "mathword",
                "seed": seed,
                "level": level,
                "index": index,
                "split": split_of(problem.question),
                "categories": list(problem.categories),
                "templates": list(problem.templates),
                "steps": [dict(s) for s in problem.steps],
            },
        )

    def generate(
        self, n: int, *, seed: int, level: int, start: int = 0, split: str | None = None
    ) -> list[Task]:
        """Generate problems ``start .. start + n - 1`` of ``(seed, level)``, or of one split.

        Args:
            n: how many problems.
            seed: the seed.
            level: difficulty 1..5.
            start: the first index (only without ``split``).
            split: ``None`` for every index in order (both splits mixed); ``"train"`` or
                ``"test"`` for the first ``n`` problems of that split (see :meth:`split`).

        Returns:
            The tasks, in index order.
        """
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        if split is not None:
            if start:
                raise ValueError("start cannot be combined with split")
            return self.split(split, n, seed=seed, level=level)
        return [self.problem(i, seed=seed, level=level) for i in range(start, start + n)]

    def iter_split(self, split: str, *, seed: int, level: int) -> Iterator[Task]:
        """Yield the problems of one split, in index order, without repeated questions.

        Args:
            split: ``"train"``, ``"validation"`` or ``"test"``.
            seed: the seed.
            level: difficulty 1..5.

        Yields:
            Tasks whose question belongs to ``split`` (see :func:`split_of`).
        """
        if split not in _SPLITS:
            raise ValueError(f"split must be one of {_SPLITS}, got {split!r}")
        if split == "validation":
            yield from self._iter_validation(seed=seed, level=level)
            return
        seen: set[str] = set()
        index = 0
        while True:
            task = self.problem(index, seed=seed, level=level)
            index += 1
            if task.meta["split"] == split and task.question not in seen:
                seen.add(task.question)
                yield task

    def _iter_validation(self, *, seed: int, level: int) -> Iterator[Task]:
        """Train-bucket problems from :data:`VALIDATION_START`, none of the guarded train ones."""
        seen = set(_train_questions(self, seed, level))
        index = VALIDATION_START
        while True:
            task = self.problem(index, seed=seed, level=level)
            index += 1
            if task.meta["split"] == "train" and task.question not in seen:
                seen.add(task.question)
                yield replace(task, meta={**task.meta, "split": "validation"})

    def split(self, split: str, n: int, *, seed: int = 0, level: int) -> list[Task]:
        """Return the first ``n`` problems of a split (disjoint from the other split by content).

        Args:
            split: ``"train"`` or ``"test"``.
            n: how many problems.
            seed: the seed.
            level: difficulty 1..5.

        Returns:
            The tasks; their ids keep the raw generator index.
        """
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        out: list[Task] = []
        if n == 0:
            return out
        for task in self.iter_split(split, seed=seed, level=level):
            if len(out) == n:
                break
            out.append(task)
        return out


_TRAIN_QUESTIONS: dict[tuple[int, int], frozenset[str]] = {}


def _train_questions(generator: MathWordGenerator, seed: int, level: int) -> frozenset[str]:
    """The questions of the first :data:`VALIDATION_GUARD` train problems (cached)."""
    key = (seed, level)
    if key not in _TRAIN_QUESTIONS:
        walk = generator.iter_split("train", seed=seed, level=level)
        _TRAIN_QUESTIONS[key] = frozenset(next(walk).question for _ in range(VALIDATION_GUARD))
    return _TRAIN_QUESTIONS[key]
