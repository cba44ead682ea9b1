import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lumos_gym.actions import (
    Action,
    format_action,
    format_actions,
    last_variable,
    parse_action,
    parse_actions,
    references,
    split_arguments,
    split_list,
    substitute,
)
from lumos_gym.errors import ActionParseError, LumosGymError, UndefinedVariableError

CANONICAL = [
    "R1 = Calculator(48/2)",
    "R5, R6 = SolveEquation(R3, R4) = -9/8, -3/5",
    "R2 = ParagraphRetrieve(R1, Query: How many kids did Julius Caesar have?)",
    "R3 = QA([R2, R5], Question: How many kids did Genghis Khan have?)",
    "R7 = Calculator(R6 > R3) = True",
    "R1 = KnowledgeQuery(Julius Caesar) = WikipediaPage(Julius Caesar).",
    "R1 = TYPE(Env, QUERY: Type Ricky Kej to search his songs, TEXT: Ricky Kej)",
    "R5 = SELECT(R4, QUERY: Choose the last year as the added date, TEXT: Past year)",
    "Output = R9 = 40",
    "Answer(R7)",
    "R2 = Calculator(((1 + 2) * (3 - 4)) ^ 2)",
    "R2 = Calculator(R1(R9))",
    "R7 = Pick(Item_names: R1, Item_features: [R3, R6], Query: slim fit, long sleeve)",
    "R1 = Code(x = [1, 2]; print(sum(x)))",
]


@pytest.mark.parametrize("text", CANONICAL)
def test_canonical_forms_round_trip(text):
    assert format_action(parse_action(text)) == text


def test_parse_fields():
    a = parse_action("R5, R6 = SolveEquation(R3, R4) = -9/8, -3/5")
    assert a == Action(("R5", "R6"), "SolveEquation", "R3, R4", "-9/8, -3/5")
    alias = parse_action("Output = R9 = 40")
    assert alias.is_alias and alias.args == "R9" and alias.result == "40"
    web = parse_action("R3 = TYPE(R2, QUERY: Type the city, TEXT: Atlanta).")
    assert web.result is None
    assert web.format() == "R3 = TYPE(R2, QUERY: Type the city, TEXT: Atlanta)"
    assert parse_action("  R1 = Calculator(1+1)  ").args == "1+1"


def test_list_split_ignores_semicolons_inside_brackets():
    actions = parse_actions("R1 = Code(a = 1; print(a)); R2 = Calculator(R1 + 1,000)")
    assert [a.name for a in actions] == ["Code", "Calculator"]
    assert actions[0].args == "a = 1; print(a)"
    assert format_actions(actions) == "R1 = Code(a = 1; print(a)); R2 = Calculator(R1 + 1,000)"


def test_lumos_o_grounding_output_parses():
    text = (
        "R1 = KnowledgeQuery(Julius Caesar); R2 = ParagraphRetrieve(R1, Query: How many kids did "
        "Julius Caesar have?); R3 = QA([R2], Question: How many kids did Julius Caesar have?); "
        "R4 = KnowledgeQuery(Genghis Khan); R7 = Calculator(R6 > R3)"
    )
    actions = parse_actions(text)
    assert [a.outputs[0] for a in actions] == ["R1", "R2", "R3", "R4", "R7"]
    assert format_actions(actions) == text


@pytest.mark.parametrize(
    ("text", "position", "expected"),
    [
        ("R1 = ", 5, "action name"),
        ("R1 = Calculator(1 + (2", 22, "')'"),
        ("R1 = Calculator(1])", 17, "')' to close '('"),
        ("Calculator)", 10, "'('"),
        ("R1 = Calculator(1) extra", 19, "'= result'"),
        ("R1, R1 = Calculator(2)", 0, "distinct"),
        ("R1 = Calculator (2)", 15, "no space"),
    ],
)
def test_parse_errors_name_position_and_expectation(text, position, expected):
    with pytest.raises(ActionParseError) as info:
        parse_action(text)
    assert info.value.position == position
    assert expected in info.value.expected
    assert f"position {position}" in str(info.value)


def test_error_position_counts_in_whole_list():
    with pytest.raises(ActionParseError) as info:
        parse_actions("R1 = Calculator(1); R2 = Calculator(")
    assert info.value.position == len("R1 = Calculator(1); R2 = Calculator(")


def test_split_arguments():
    args = split_arguments("R1, Query: Who, if anyone, won?")
    assert args.positional == ("R1",)
    assert args.get("query") == "Who, if anyone, won?"
    web = split_arguments("R4, QUERY: Choose the year, TEXT: Past year")
    assert web.named == (("QUERY", "Choose the year"), ("TEXT", "Past year"))
    assert split_arguments("1,000 + 2, 3").positional == ("1,000 + 2", "3")
    assert split_arguments("f(a, b), [c, d]").positional == ("f(a, b)", "[c, d]")
    assert split_list("[R2, R5]") == ["R2", "R5"] and split_list("R2") == ["R2"]


def test_references_and_substitution():
    assert references("R10 + R2 * R10 - Output") == ["R10", "R2", "Output"]
    values = {"R1": "3 + 4", "R2": "5", "R3": "(1 + 1)"}
    assert substitute("R1 * R2 + R3", values, parenthesize=True) == "(3 + 4) * 5 + (1 + 1)"
    assert substitute("R1 * R2", values) == "3 + 4 * 5"
    assert substitute("R2", values, render=repr) == "'5'"
    assert substitute("Output the result", {}) == "Output the result"
    with pytest.raises(UndefinedVariableError, match="R12"):
        substitute("R12", {"R1": "1"})  # R1 must not match inside R12
    with pytest.raises(UndefinedVariableError, match="R4"):
        substitute("R4 + 1", values)


def test_last_variable():
    assert last_variable(["R1", "R10", "R9"]) == "R10"
    assert last_variable(["R1", "Output"]) == "Output"
    assert last_variable([]) is None


_variables = st.integers(1, 300).map(lambda n: f"R{n}") | st.just("Output")
_free_text = st.text(
    st.characters(blacklist_characters="()[]{};", blacklist_categories=("Cs",)), max_size=12
)


@st.composite
def _balanced(draw, depth=0):
    parts = draw(st.lists(_free_text, min_size=1, max_size=3))
    out = []
    for part in parts:
        out.append(part)
        if depth < 3 and draw(st.booleans()):
            opener, closer = draw(st.sampled_from([("(", ")"), ("[", "]"), ("{", "}")]))
            out.append(opener + draw(_balanced(depth + 1)) + closer)
    return "".join(out)


@st.composite
def _actions(draw):
    outputs = tuple(dict.fromkeys(draw(st.lists(_variables, max_size=3))))
    name = draw(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True))
    args = draw(_balanced())
    result = None
    if draw(st.booleans()):
        result = draw(_free_text.map(str.strip).filter(bool))
    return Action(outputs, name, args, result)


@settings(max_examples=1000, deadline=None)
@given(_actions())
@pytest.mark.full
def test_property_format_parse_round_trip(action):
    text = format_action(action)
    assert parse_action(text) == action
    assert format_action(parse_action(text)) == text


@settings(max_examples=300, deadline=None)
@given(st.lists(_actions().map(lambda a: a.without_result()), min_size=1, max_size=4))
@pytest.mark.full
def test_property_lists_round_trip(actions):
    text = format_actions(actions)
    assert parse_actions(text) == actions


@settings(max_examples=5000, deadline=None)
@given(st.text(max_size=80))
@pytest.mark.full
def test_property_any_string_parses_or_raises_own_error(text):
    try:
        parsed = parse_actions(text)
    except ActionParseError as e:
        assert 0 <= e.position <= len(text)
        assert isinstance(e, LumosGymError)
    else:
        assert parsed


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="R1234567890 =,()[];:.QAOutputCalcr-+*/", max_size=60))
@pytest.mark.full
def test_property_action_like_strings(text):
    try:
        parse_actions(text)
    except ActionParseError:
        pass
