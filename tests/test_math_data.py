"""Tests of the math task sources: official-format loaders, bundled samples, MathWord, metrics."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lumos_gym.envs.math.data import (
    SAMPLE_FILES,
    calculator_expression,
    detect_math_format,
    load_asdiv,
    load_gsm8k,
    load_math_dataset,
    load_svamp,
    parse_asdiv_answer,
    parse_asdiv_formula,
    parse_calc_marks,
    sample_path,
    strip_calc_marks,
)
from lumos_gym.envs.math.mathword import (
    LEVEL_CATEGORIES,
    VALIDATION_GUARD,
    VALIDATION_START,
    MathWordGenerator,
    split_of,
    template_names,
)
from lumos_gym.envs.math.official import MathWordEnv
from lumos_gym.errors import DataError
from lumos_gym.scoring.answers import (
    MAX_NUMBER_CHARS,
    answers_match,
    math_accuracy,
    normalize_number,
)

# ---------------------------------------------------------------------------------------------
# A tiny safe evaluator: numbers, + - * /, unary minus and parentheses; nothing else.

_BINARY = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
}


def safe_eval(expr: str) -> Fraction:
    """Evaluate plain arithmetic exactly (decimal literals become exact fractions)."""

    def walk(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return Fraction(str(node.value))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            value = walk(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](walk(node.left), walk(node.right))
        raise ValueError(f"not plain arithmetic: {ast.dump(node)}")

    return walk(ast.parse(expr.replace(",", ""), mode="eval"))


def shown_matches(value: Fraction, shown: str) -> bool:
    """Whether ``shown`` is ``value`` exactly or rounded to the decimals ``shown`` has."""
    target = Fraction(shown.replace(",", ""))
    if value == target:
        return True
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    return decimals > 0 and abs(value - target) <= Fraction(1, 2 * 10**decimals)


def test_safe_eval_is_safe_and_exact():
    assert safe_eval("140*0.10") == 14
    assert safe_eval("(5+1)/2") == 3
    assert safe_eval("-2+3") == 1
    for bad in ("__import__('os')", "2**3", "x+1", "len('a')", "1 if 1 else 2"):
        with pytest.raises(ValueError):
            safe_eval(bad)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def jsonl(*records: object) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def assert_one_line_error(exc: pytest.ExceptionInfo[DataError], *needles: str) -> None:
    message = str(exc.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, (needle, message)


# ---------------------------------------------------------------------------------------------
# Bundled samples


def test_bundled_samples_exist_with_enough_problems():
    for name in SAMPLE_FILES:
        assert sample_path(name).is_file()
    assert len(load_math_dataset("gsm8k")) >= 20
    assert len(load_math_dataset("svamp")) >= 20
    assert len(load_math_dataset("asdiv")) >= 20
    assert len(load_math_dataset("gsm8k_socratic")) >= 3


@pytest.mark.parametrize("name", ["gsm8k", "gsm8k_socratic"])
def test_bundled_gsm8k_calculator_marks_are_correct(name):
    tasks = load_math_dataset(name)
    for task in tasks:
        marks = parse_calc_marks(task.rationale)
        assert marks, task.id
        for mark in marks:
            value = safe_eval(mark.expr)
            assert shown_matches(value, mark.value), (task.id, mark)
            # the number written right after the mark is the mark's value
            after = task.rationale[mark.end :]
            assert after.startswith(mark.value), (task.id, mark, after[:10])
            # every number of the expression was given before (question or earlier text)
            before = task.question + " " + strip_calc_marks(task.rationale[: mark.start])
            known = {normalize_number(n) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", before)}
            for number in re.findall(r"\d+(?:\.\d+)?", mark.expr):
                assert normalize_number(number) in known, (task.id, mark.expr, number)
        last = safe_eval(marks[-1].expr)
        if task.gold_actions[-1] == f"Answer(R{len(marks)})":
            assert last == Fraction(task.answer), task.id
        else:
            assert task.gold_actions[-1] == f"Answer({task.answer})"
            assert answers_match(task.answer, str(int(last))), task.id  # a rounded-down count
        assert task.rationale.count("\n") + 1 == len(task.meta["steps"])
        raw_final = task.meta["raw"]["answer"].rsplit("####", 1)[1].strip()
        assert task.answer == raw_final.replace(",", "")


def test_bundled_socratic_records_have_subquestions():
    for task in load_math_dataset("gsm8k_socratic"):
        assert task.meta["variant"] == "socratic"
        for step in task.meta["steps"]:
            assert step["subquestion"].endswith("?")
            assert " ** " not in step["text"]


def test_bundled_svamp_equations_give_the_answers():
    tasks = load_math_dataset("svamp")
    assert len({t.id for t in tasks}) == len(tasks)
    for task in tasks:
        raw = task.meta["raw"]
        assert set(raw) == {"ID", "Body", "Question", "Equation", "Answer", "Type"}
        assert isinstance(raw["Answer"], float)
        assert safe_eval(raw["Equation"]) == Fraction(str(raw["Answer"]))
        assert task.question == raw["Body"].strip() + " " + raw["Question"].strip()
        assert not task.answer.endswith(".0")
        assert task.gold_actions == (f"R1 = Calculator({raw['Equation']})", "Answer(R1)")
        assert task.id == f"svamp/test/{raw['ID']}"


def test_bundled_asdiv_formulas_and_answers_agree():
    tasks = load_math_dataset("asdiv")
    kinds = Counter(t.meta["answer_kind"] for t in tasks)
    assert {"number", "ratio", "list", "text"} <= set(kinds)
    for task in tasks:
        calcs = parse_asdiv_formula(task.meta["formula"])
        if calcs:
            for expr, value in calcs:
                assert safe_eval(expr) == Fraction(value), (task.id, expr)
        final = task.gold_actions[-1]
        ref = re.fullmatch(r"Answer\(R(\d+)\)", final)
        if ref:
            _, value = calcs[int(ref.group(1)) - 1]
            assert answers_match(value, task.answer), task.id
        else:
            answer = final.removeprefix("Answer(").removesuffix(")")
            assert answers_match(answer, task.answer), task.id
    assert sum(1 for t in tasks if t.gold_actions[0].startswith("R1 = ")) >= 15


# ---------------------------------------------------------------------------------------------
# GSM8K loader edge cases


GSM_RECORD = {
    "question": "Natalia had 3 pens and bought 4 more. How many does she have?",
    "answer": "She has 3+4 = <<3+4=7>>7 pens.\n#### 7",
}


def test_gsm8k_main_record(tmp_path):
    path = write(tmp_path, "train.jsonl", jsonl(GSM_RECORD))
    (task,) = load_gsm8k(path, "train")
    assert task.id == "gsm8k/train/0"
    assert task.task_type == "math"
    assert task.answer == "7"
    assert task.rationale == "She has 3+4 = <<3+4=7>>7 pens."
    assert task.gold_actions == ("R1 = Calculator(3+4)", "Answer(R1)")
    assert task.meta["raw"] == GSM_RECORD
    assert task.meta["variant"] == "main"


def test_gsm8k_negative_and_comma_answers_and_blank_lines(tmp_path):
    negative = {"question": "q1", "answer": "It is 2-5 = <<2-5=-3>>-3.\n#### -3"}
    comma = {"question": "q2", "answer": "It is 1000+234 = <<1000+234=1234>>1234.\n#### 1,234"}
    path = write(tmp_path, "t.jsonl", "\n" + jsonl(negative) + "\n\n" + jsonl(comma))
    first, second = load_gsm8k(path, "test")
    assert (first.id, first.answer, first.gold_actions[-1]) == ("gsm8k/test/0", "-3", "Answer(R1)")
    assert (second.id, second.answer, second.gold_actions[-1]) == (
        "gsm8k/test/1",
        "1234",
        "Answer(R1)",
    )


def test_gsm8k_answer_not_from_the_last_mark(tmp_path):
    rec = {"question": "q", "answer": "20/6 = <<20/6=3.33>>3.33, so 3 cars.\n#### 3"}
    (task,) = load_gsm8k(write(tmp_path, "t.jsonl", jsonl(rec)))
    assert task.gold_actions == ("R1 = Calculator(20/6)", "Answer(3)")


def test_gsm8k_no_marks_and_power(tmp_path):
    plain = {"question": "q", "answer": "There are 7 days.\n#### 7"}
    power = {"question": "q", "answer": "It is 2**3 = <<2**3=8>>8.\n#### 8"}
    a, b = load_gsm8k(write(tmp_path, "t.jsonl", jsonl(plain, power)))
    assert a.gold_actions == ("Answer(7)",)
    assert b.gold_actions == ("R1 = Calculator(2^3)", "Answer(R1)")


def test_gsm8k_socratic_record(tmp_path):
    rec = {
        "question": "q",
        "answer": "How many in May? ** 48/2 = <<48/2=24>>24\nHow many in all? ** 48+24 = "
        "<<48+24=72>>72\n#### 72",
    }
    (task,) = load_gsm8k(write(tmp_path, "s.jsonl", jsonl(rec)))
    assert task.meta["variant"] == "socratic"
    assert [s["subquestion"] for s in task.meta["steps"]] == [
        "How many in May?",
        "How many in all?",
    ]
    assert task.gold_actions == ("R1 = Calculator(48/2)", "R2 = Calculator(48+24)", "Answer(R2)")


def test_gsm8k_json_list_variant(tmp_path):
    path = write(tmp_path, "t.json", json.dumps([GSM_RECORD, GSM_RECORD]))
    assert [t.id for t in load_gsm8k(path, "dev")] == ["gsm8k/dev/0", "gsm8k/dev/1"]


def test_gsm8k_errors_name_file_and_place(tmp_path):
    with pytest.raises(DataError) as exc:
        load_gsm8k(tmp_path / "missing.jsonl")
    assert_one_line_error(exc, "missing.jsonl", "not found")

    with pytest.raises(DataError) as exc:
        load_gsm8k(write(tmp_path, "empty.jsonl", "\n \n"))
    assert_one_line_error(exc, "empty.jsonl", "empty")

    bad = jsonl(GSM_RECORD) + '{"question": "q", "answer": \n'
    with pytest.raises(DataError) as exc:
        load_gsm8k(write(tmp_path, "bad.jsonl", bad))
    assert_one_line_error(exc, "bad.jsonl", "line 2", "bad JSON")

    missing = jsonl(GSM_RECORD, {"question": "only a question"})
    with pytest.raises(DataError) as exc:
        load_gsm8k(write(tmp_path, "miss.jsonl", missing))
    assert_one_line_error(exc, "miss.jsonl", "record 1", "'answer'")

    with pytest.raises(DataError) as exc:
        load_gsm8k(write(tmp_path, "nohash.jsonl", jsonl({"question": "q", "answer": "7"})))
    assert_one_line_error(exc, "nohash.jsonl", "####")

    with pytest.raises(DataError) as exc:
        load_gsm8k(write(tmp_path, "list.jsonl", "[1, 2]\n"))
    assert_one_line_error(exc, "list.jsonl", "record 0", "JSON object")


def test_calculator_expression_and_marks():
    assert calculator_expression(" 3×4÷2 − 1 ") == "3*4/2 - 1"
    marks = parse_calc_marks("a <<1+1=2>>2 b <<x>> c <<=5>>")
    assert [(m.expr, m.value) for m in marks] == [("1+1", "2"), ("x", None)]
    assert strip_calc_marks("a <<1+1=2>>2") == "a 2"


# ---------------------------------------------------------------------------------------------
# SVAMP loader edge cases


def test_svamp_official_record(tmp_path):
    rec = {
        "ID": "chal-9",
        "Body": "Dan had $ 3 left. If he had $ 4 at the start",
        "Question": "How much did he spend?",
        "Equation": "( 4.0 - 3.0 )",
        "Answer": 1.0,
        "Type": "Subtraction",
    }
    (task,) = load_svamp(write(tmp_path, "SVAMP.json", json.dumps([rec], indent=4)), "test")
    assert task.id == "svamp/test/chal-9"
    assert task.question == "Dan had $ 3 left. If he had $ 4 at the start How much did he spend?"
    assert task.answer == "1"
    assert task.gold_actions == ("R1 = Calculator(( 4.0 - 3.0 ))", "Answer(R1)")
    assert task.meta["type"] == "Subtraction"


def test_svamp_variants(tmp_path):
    records = [
        # Question only, answer as text, no equation, lower-case keys (a hub export)
        {"id": "a", "question": "What is 2.5 plus 2?", "answer": "4.50"},
        # numbers placeholders
        {
            "ID": "b",
            "Body": "Tom has number0 apples and buys number1 more.",
            "Question": "How many apples does he have?",
            "Numbers": "5.0 7.0",
            "Equation": "( number0 + number1 )",
            "Answer": 12.0,
            "Group": [0, 1],
        },
        # question_concat wins
        {"ID": "c", "Body": "B", "Question": "Q?", "question_concat": "B, Q?", "Answer": 0.5},
        # a non-arithmetic equation
        {"ID": "d", "Question": "x?", "Equation": "x = 3", "Answer": 3},
    ]
    a, b, c, d = load_svamp(write(tmp_path, "v.jsonl", jsonl(*records)), "train")
    assert (a.id, a.question, a.answer, a.gold_actions) == (
        "svamp/train/a",
        "What is 2.5 plus 2?",
        "4.5",
        ("Answer(4.5)",),
    )
    assert b.question == "Tom has 5 apples and buys 7 more. How many apples does he have?"
    assert b.gold_actions[0] == "R1 = Calculator(( 5 + 7 ))"
    assert b.meta["group"] == [0, 1]
    assert (c.question, c.answer) == ("B, Q?", "0.5")
    assert d.gold_actions == ("Answer(3)",)


def test_svamp_csv_fold_variant(tmp_path):
    text = (
        "Question,Numbers,Equation,Answer,group_nums,Body\n"
        '"Sam has number0 pens. He loses number1. How many are left?",3.0 1.0,'
        '( number0 - number1 ),2.0,"[0, 1]","Sam has number0 pens. He loses number1."\n'
        '"Ann has number0 cats. How many legs?",2.0,* number0 4.0,8.0,[],\n'
    )
    first, second = load_svamp(write(tmp_path, "dev.csv", text), "dev")
    assert first.id == "svamp/dev/0"
    assert first.question == "Sam has 3 pens. He loses 1. How many are left?"
    assert (first.answer, first.gold_actions[0]) == ("2", "R1 = Calculator(( 3 - 1 ))")
    assert second.question == "Ann has 2 cats. How many legs?"
    assert second.gold_actions == ("Answer(8)",)  # prefix notation is not a Calculator formula


def test_svamp_errors(tmp_path):
    with pytest.raises(DataError) as exc:
        load_svamp(
            write(tmp_path, "s.json", json.dumps([{"ID": "1", "Body": "b", "Question": "q"}]))
        )
    assert_one_line_error(exc, "s.json", "record 0", "'Answer'")

    with pytest.raises(DataError) as exc:
        load_svamp(write(tmp_path, "n.json", json.dumps([{"ID": "1", "Answer": 2.0}])))
    assert_one_line_error(exc, "n.json", "'Question'")

    dup = [{"ID": "1", "Question": "q", "Answer": 1.0}] * 2
    with pytest.raises(DataError) as exc:
        load_svamp(write(tmp_path, "d.json", json.dumps(dup)))
    assert_one_line_error(exc, "d.json", "duplicate")

    with pytest.raises(DataError) as exc:
        load_svamp(write(tmp_path, "broken.json", '[{"ID": "1",\n "Answer": ]'))
    assert_one_line_error(exc, "broken.json", "bad JSON", "line 2")


# ---------------------------------------------------------------------------------------------
# ASDiv loader edge cases

ASDIV_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Machine-Reading-Corpus-File>
<ProblemSet>
<Problem ID="nluds-0001" Grade="1" Source="http://example.org">
<Body>Seven red apples and two green apples are in the basket.</Body>
<Question>How many apples are in the basket?</Question>
<Solution-Type>Addition</Solution-Type>
<Answer>9 (apples)</Answer>
<Formula>7+2=9</Formula>
</Problem>
<Problem ID="nluds-0002" Grade="4" Source="http://example.org">
<Body>Two friends walk 5 km; one walks 1 km more.</Body>
<Question>How far does each walk?</Question>
<Solution-Type>Algebra-2</Solution-Type>
<Answer>3 (km); 2 (km)</Answer>
<Formula>x+y=5; x-y=1</Formula>
</Problem>
<Problem ID="nluds-0003" Grade="3" Source="http://example.org">
<Body>There are 31 pens and boxes of 8.</Body>
<Question>How many pens are left over?</Question>
<Solution-Type>Floor-Division</Solution-Type>
<Answer>7 (pens)</Answer>
<Formula>31/8=3 r 7</Formula>
</Problem>
</ProblemSet>
</Machine-Reading-Corpus-File>
"""


def test_asdiv_xml(tmp_path):
    one, two, three = load_asdiv(write(tmp_path, "ASDiv.xml", ASDIV_XML), "test")
    assert one.id == "asdiv/test/nluds-0001"
    assert one.question == (
        "Seven red apples and two green apples are in the basket. "
        "How many apples are in the basket?"
    )
    assert (one.answer, one.meta["units"], one.meta["answer_kind"]) == ("9", ("apples",), "number")
    assert one.gold_actions == ("R1 = Calculator(7+2)", "Answer(R1)")
    assert (one.meta["grade"], one.meta["solution_type"]) == ("1", "Addition")
    assert (two.answer, two.meta["answer_kind"], two.gold_actions) == (
        "3; 2",
        "list",
        ("Answer(3, 2)",),
    )
    assert three.gold_actions == ("Answer(7)",)
    assert three.rationale == "31/8=3 r 7"


def test_asdiv_hub_json_lines(tmp_path):
    records = [
        {
            "body": "Mia has 4 cats.",
            "question": "How many legs?",
            "solution_type": "Multiplication",
            "answer": "16 (legs)",
            "formula": "4*4=16",
        },
        {
            "body": "",
            "question": "Ratio of 2 to 4?",
            "solution_type": "Ratio",
            "answer": "1:2",
            "formula": "2:4=1:2",
        },
    ]
    a, b = load_asdiv(write(tmp_path, "asdiv.jsonl", jsonl(*records)), "validation")
    assert (a.id, a.answer, a.gold_actions) == (
        "asdiv/validation/0",
        "16",
        ("R1 = Calculator(4*4)", "Answer(R1)"),
    )
    assert a.meta["format"] == "json"
    assert (b.id, b.question, b.answer, b.gold_actions) == (
        "asdiv/validation/1",
        "Ratio of 2 to 4?",
        "1:2",
        ("Answer(1:2)",),
    )


def test_asdiv_errors(tmp_path):
    missing = ASDIV_XML.replace("<Answer>9 (apples)</Answer>", "")
    with pytest.raises(DataError) as exc:
        load_asdiv(write(tmp_path, "m.xml", missing))
    assert_one_line_error(exc, "m.xml", "nluds-0001", "<Answer>")

    with pytest.raises(DataError) as exc:
        load_asdiv(write(tmp_path, "bad.xml", "<Machine-Reading-Corpus-File><ProblemSet>"))
    assert_one_line_error(exc, "bad.xml", "bad XML")

    with pytest.raises(DataError) as exc:
        load_asdiv(write(tmp_path, "none.xml", "<Machine-Reading-Corpus-File/>"))
    assert_one_line_error(exc, "none.xml", "no <Problem>")

    with pytest.raises(DataError) as exc:
        load_asdiv(write(tmp_path, "j.jsonl", jsonl({"body": "b", "answer": "1"})))
    assert_one_line_error(exc, "j.jsonl", "record 0", "'question'")

    with pytest.raises(DataError) as exc:
        load_asdiv(write(tmp_path, "e.xml", ""))
    assert_one_line_error(exc, "e.xml", "empty")


def test_parse_asdiv_answer_and_formula():
    assert parse_asdiv_answer("9 (apples)").values == ("9",)
    assert parse_asdiv_answer("1,200 (dollars)").values == ("1200",)
    assert parse_asdiv_answer("2 (km); 3 (km)").units == ("km", "km")
    assert parse_asdiv_answer("3:4").kind == "ratio"
    assert parse_asdiv_answer("3/8").kind == "number"
    assert parse_asdiv_answer("January").kind == "text"
    assert parse_asdiv_answer("3 r 2").kind == "text"
    assert parse_asdiv_formula("7+2=9") == [("7+2", "9")]
    assert parse_asdiv_formula("3 x 4=12") == [("3*4", "12")]
    assert parse_asdiv_formula("x=(25+7)/2=16") == [("(25+7)/2", "16")]
    assert parse_asdiv_formula("50-18=32; 32+25=57") == [("50-18", "32"), ("32+25", "57")]
    for formula in ("31/8=3 r 7", "12:16=3:4", "x+y=25", "LCM(4,6)=12", "5>3", ""):
        assert parse_asdiv_formula(formula) is None, formula


# ---------------------------------------------------------------------------------------------
# Dispatch


def test_detect_and_dispatch_by_content(tmp_path):
    gsm = write(tmp_path, "a.jsonl", jsonl(GSM_RECORD))
    svamp = write(
        tmp_path,
        "b.json",
        json.dumps(
            [{"ID": "x", "Body": "b", "Question": "q", "Equation": "( 1.0 + 1.0 )", "Answer": 2.0}]
        ),
    )
    asdiv_xml = write(tmp_path, "c.xml", ASDIV_XML)
    asdiv_json = write(
        tmp_path,
        "d.jsonl",
        jsonl(
            {"body": "b", "question": "q", "answer": "1", "formula": "1=1", "solution_type": "x"}
        ),
    )
    expected = {gsm: "gsm8k", svamp: "svamp", asdiv_xml: "asdiv", asdiv_json: "asdiv"}
    for path, name in expected.items():
        assert detect_math_format(path) == name
        tasks = load_math_dataset(None, path, split="dev")
        assert tasks[0].id.startswith(f"{name}/dev/")
        assert load_math_dataset(name.upper(), path, split="dev") == tasks

    with pytest.raises(DataError) as exc:
        load_math_dataset("svamp", gsm)
    assert_one_line_error(exc, "a.jsonl", "gsm8k")
    with pytest.raises(DataError) as exc:
        detect_math_format(write(tmp_path, "odd.jsonl", jsonl({"foo": 1})))
    assert_one_line_error(exc, "odd.jsonl", "cannot tell")
    with pytest.raises(DataError) as exc:
        load_math_dataset("gsm8kk")
    assert_one_line_error(exc, "unknown", "did you mean 'gsm8k'")
    with pytest.raises(DataError):
        load_math_dataset()


# ---------------------------------------------------------------------------------------------
# MathWord


def substitute(expr: str, values: dict[str, str]) -> str:
    return re.sub(r"R(\d+)", lambda m: f"({values['R' + m.group(1)]})", expr)


def check_mathword_task(task) -> None:
    level = task.meta["level"]
    steps = task.meta["steps"]
    assert len(steps) == level
    assert len(task.gold_actions) == level + 1
    assert task.gold_actions[-1] == f"Answer(R{level})"
    assert task.rationale.endswith(f"\n#### {task.answer}")
    values: dict[str, str] = {}
    marks = parse_calc_marks(task.rationale)
    assert len(marks) == level
    rows = zip(steps, task.gold_actions[:-1], marks, strict=True)
    for k, (step, action, mark) in enumerate(rows, 1):
        assert step["action"] == action
        assert step["subgoal"] and step["subgoal"][0].isupper()
        match = re.fullmatch(rf"R{k} = Calculator\((.+)\)", action)
        assert match, action
        # references only to earlier results
        assert all(int(r) < k for r in re.findall(r"R(\d+)", match.group(1)))
        value = safe_eval(substitute(match.group(1), values))
        assert value == Fraction(step["value"]), (task.id, action)
        assert value > 0 and (value * 100).denominator == 1
        assert safe_eval(mark.expr) == value and Fraction(mark.value) == value
        values[f"R{k}"] = step["value"]
    assert task.answer == steps[-1]["value"]
    assert set(task.meta["categories"]) <= set(LEVEL_CATEGORIES[level])


def test_mathword_steps_verify_by_arithmetic():
    gen = MathWordGenerator()
    for level in range(1, 6):
        for task in gen.generate(40, seed=3, level=level):
            check_mathword_task(task)
            assert task.id == f"mathword/L{level}/3/{task.meta['index']}"


def test_mathword_is_deterministic_and_independent_of_n():
    a, b = MathWordGenerator(), MathWordGenerator()
    assert a.problem(7, seed=1, level=3) == b.problem(7, seed=1, level=3)
    assert a.generate(10, seed=1, level=3)[7] == b.problem(7, seed=1, level=3)
    assert a.generate(3, seed=1, level=3, start=7)[0] == b.problem(7, seed=1, level=3)
    first = [t.question for t in a.generate(20, seed=1, level=3)]
    other = [t.question for t in a.generate(20, seed=2, level=3)]
    assert first != other and len(set(first) & set(other)) <= 1
    assert len(set(first)) >= 19


def test_mathword_levels_change_step_counts_and_widen_operations():
    gen = MathWordGenerator()
    for level in range(1, 6):
        tasks = gen.generate(60, seed=0, level=level)
        assert {len(t.meta["steps"]) for t in tasks} == {level}
        introduced = set(LEVEL_CATEGORIES[level]) - set(LEVEL_CATEGORIES.get(level - 1, ()))
        for task in tasks:
            if level > 1:
                assert introduced & set(task.meta["categories"]), task.id
        if level == 1:
            one_op = re.compile(r"R1 = Calculator\([\d.]+ [-+] [\d.]+\)")
            assert all(one_op.fullmatch(t.gold_actions[0]) for t in tasks)


def test_mathword_uses_every_template():
    gen = MathWordGenerator()
    used = Counter()
    for level in range(1, 6):
        for task in gen.generate(400, seed=0, level=level):
            used.update(task.meta["templates"])
    names = [n for group in template_names().values() for n in group]
    assert len(names) >= 15
    assert [n for n in names if not used[n]] == []


def test_mathword_splits_are_disjoint():
    gen = MathWordGenerator()
    for level in (1, 4):
        train = gen.split("train", 150, seed=0, level=level)
        test = gen.split("test", 40, seed=0, level=level)
        test_other_seed = gen.split("test", 40, seed=5, level=level)
        assert len(train) == 150 and len(test) == 40
        train_q = {t.question for t in train}
        assert len(train_q) == 150
        assert not train_q & {t.question for t in test + test_other_seed}
        assert not {t.id for t in train} & {t.id for t in test}
        assert all(split_of(t.question) == "test" == t.meta["split"] for t in test)
    assert gen.generate(40, seed=0, level=4, split="test") == test[:40]
    assert gen.split("test", 0, level=2) == []
    with pytest.raises(ValueError):
        gen.split("dev", 1, level=1)
    with pytest.raises(ValueError):
        gen.problem(0, seed=0, level=6)


def test_mathword_validation_split_shares_no_question_with_train_or_test():
    gen = MathWordGenerator()
    for level in (1, 3):
        val = gen.split("validation", 30, seed=0, level=level)
        assert len({t.question for t in val}) == 30
        assert all(t.meta["split"] == "validation" and split_of(t.question) == "train"
                   for t in val)
        assert all(int(t.id.rsplit("/", 1)[1]) >= VALIDATION_START for t in val)
        guarded = {t.question for t in gen.split("train", VALIDATION_GUARD, seed=0, level=level)}
        assert not guarded & {t.question for t in val}
        assert gen.split("validation", 30, seed=0, level=level) == val  # deterministic
    env = MathWordEnv(split="validation", levels=[2], num_tasks=3)
    try:
        assert [t.meta["split"] for t in env.tasks] == ["validation"] * 3
    finally:
        env.close()


# ---------------------------------------------------------------------------------------------
# Metrics


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$1,234.50", "1234.5"),
        ("7.0", "7"),
        ("7", "7"),
        ("-3", "-3"),
        ("\u22123", "-3"),
        ("50%", "50"),
        ("1/2", "0.5"),
        ("1/3", "1/3"),
        ("2 1/2", "2.5"),
        ("1.5e3", "1500"),
        ("42.", "42"),
        (".5", "0.5"),
        ("9 (apples)", "9"),
        ("The answer is 18 dollars.", "18"),
        ("twelve", "12"),
        ("3:4", None),
        ("2; 3", None),
        ("5 - 3", None),
        ("R3", None),
        ("1,2", None),
        ("", None),
        (None, None),
        ("no number", None),
    ],
)
def test_normalize_number(text, expected):
    assert normalize_number(text) == expected


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [
        ("18", "18", True),
        ("18.0", "18", True),
        ("$18", "18", True),
        ("1,000", "1000", True),
        ("0.5", "1/2", True),
        # exact values since issue 34: the old 1e-6 tolerance accepted 18.000000001 for 18
        ("18.000000001", "18", False),
        ("18.1", "18", False),
        ("-5", "5", False),
        (None, "5", False),
        ("", "5", False),
        ("6:8", "3:4", True),
        ("0.75", "3:4", True),
        ("2:3", "3:4", False),
        ("3, 2", "3; 2", True),
        ("3 and 2", "3; 2", True),
        ("2; 3", "3; 2", False),
        ("3", "3; 2", False),
        ("The Bag of Rice.", "the bag of rice", True),
        ("rice", "the bag of rice", False),
        ("True", "true", True),
    ],
)
def test_answers_match(pred, gold, expected):
    assert answers_match(pred, gold) is expected
    assert math_accuracy(pred, gold) == (1.0 if expected else 0.0)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=-(10**9), max_value=10**9), st.integers(min_value=0, max_value=3))
def test_numbers_match_their_formatted_forms(n, places):
    value = Fraction(n, 10**places)
    plain = f"{float(value):.{places}f}" if places else str(n)
    assert answers_match(plain, str(n / 10**places) if places else str(n))
    assert answers_match(f"{float(value):,.{places}f}", plain)
    assert normalize_number(plain) == normalize_number(plain + "0" if places else plain + ".0")


def test_json_lines_keep_line_separator_characters_inside_strings(tmp_path):
    # U+2028 and U+0085 are line breaks for str.splitlines but plain characters in JSON strings
    path = tmp_path / "train.jsonl"
    row = {"question": "Ann has 2 pens\u2028and 3 more\u0085pens. How many?",
           "answer": "2+3=<<2+3=5>>5\n#### 5"}
    path.write_text(json.dumps(row, ensure_ascii=False) + "\r\n", encoding="utf-8")
    [task] = load_gsm8k(path, "train")
    assert "\u2028and 3 more\u0085pens" in task.question and task.answer == "5"


def test_a_huge_numeric_answer_is_wrong_not_an_overflow():
    """A model may write a 900-digit number: it is compared exactly, never through float."""
    assert not answers_match("9" * 900, "12")
    assert answers_match("9" * 900, "9" * 900)
    # scoring is exact since issue 34; the conversion rules' tolerance is an explicit rel_tol
    assert not answers_match("12.0000001", "12") and not answers_match("12.01", "12")
    assert answers_match("12.0000001", "12", rel_tol=1e-6)
    assert not answers_match("12.01", "12", rel_tol=1e-6)
    assert not answers_match("9" * 900, "12", rel_tol=1e-6)


def test_a_number_too_long_to_read_exactly_is_text():
    """Reading a decimal is quadratic in its length: past MAX_NUMBER_CHARS it is plain text."""
    longest = "9" * MAX_NUMBER_CHARS
    assert normalize_number(longest) == longest
    for huge in ("9" * 5000, "9" * 5000 + " 1/2", "1/" + "9" * 5000, "0." + "0" * 5000 + "1"):
        assert normalize_number(huge) is None  # no ValueError from int()'s 4,300-digit limit
        assert not answers_match(huge, "12") and answers_match(huge, huge)
    assert not answers_match("9" * 5000 + ":1", "3:4") and not answers_match("9" * 10**6, "12")


def test_a_split_the_bundled_sample_does_not_have_is_warned_about():
    import gymnasium as gym

    with pytest.warns(UserWarning, match="bundled sample gsm8k_sample.jsonl has no 'train' split"):
        env = gym.make("lumos/GSM8K-v0", split="train")
    env.close()


def test_generated_tasks_are_shared_by_equal_params_only():
    from lumos_gym.envs.sources import GeneratedSource

    calls = []

    def make(tag):
        def generate():
            calls.append(tag)
            return [MathWordEnv(levels=1, num_tasks=1).tasks[0]]

        return generate

    first = GeneratedSource(make("a"), {"generator": "test-shared", "seed": 1}, share=True)
    again = GeneratedSource(make("b"), {"seed": 1, "generator": "test-shared"}, share=True)
    other = GeneratedSource(make("c"), {"generator": "test-shared", "seed": 2}, share=True)
    private = GeneratedSource(make("d"), {"generator": "test-shared", "seed": 1})
    tasks = first.load()
    assert again.load() == tasks and again.load() is not tasks  # a list of its own
    tasks.clear()  # a caller's list: the shared tasks stay whole
    assert len(GeneratedSource(make("e"), first.params, share=True).load()) == 1
    other.load(), private.load()
    assert calls == ["a", "c", "d"]


def test_mathword_envs_with_equal_options_share_one_generation():
    made = [MathWordEnv(split="test", levels=[2, 3], num_tasks=4, seed=5) for _ in range(2)]
    assert [t.id for t in made[0].tasks] == [t.id for t in made[1].tasks]
    assert made[0].tasks[0] is made[1].tasks[0]
    reseeded = MathWordEnv(split="test", levels=[2, 3], num_tasks=4, seed=6)
    assert [t.question for t in reseeded.tasks] != [t.question for t in made[0].tasks]
