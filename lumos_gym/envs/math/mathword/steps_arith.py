"""MathWord step templates of the four operations: ``add``, ``sub``, ``mul`` and ``div``."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from lumos_gym.envs.math.mathword.story import (
    _CHORES,
    _HOURS,
    _MEAL_FEES,
    _PLACES,
    _SHOP_FEES,
    _SMALL_BUYS,
    _count,
    _Ctx,
    _plural,
    _Qty,
    _registrar,
    _Step,
    _step,
    _TemplateSpec,
)

_ARITH_TEMPLATES: list[_TemplateSpec] = []
"""The step templates of this module, in definition order."""
_template = _registrar(_ARITH_TEMPLATES)


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
