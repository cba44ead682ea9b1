"""MathWord step templates of applied arithmetic: ``percent``, ``rate`` and ``compare``."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from lumos_gym.envs.math.mathword.story import (
    _HOURS,
    _ITEMS,
    _PRODUCTS,
    _cap,
    _clean,
    _count,
    _Ctx,
    _fmt,
    _money,
    _Person,
    _Qty,
    _registrar,
    _Step,
    _step,
    _TemplateSpec,
)

_APPLIED_TEMPLATES: list[_TemplateSpec] = []
"""The step templates of this module, in definition order."""
_template = _registrar(_APPLIED_TEMPLATES)


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
