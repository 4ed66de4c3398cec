"""Grammars for the embedded model's constrained decoding, checked by llama.cpp's own grammar
engine over the real model's vocabulary (loaded vocabulary-only: half a second, no weights):
what a grammar lets through is what the model can write."""

from __future__ import annotations

import ctypes
import json
import math
import threading
import time
from collections.abc import Iterator
from enum import StrEnum
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from maestro.agents.grammar import (
    GrammarCache,
    GrammarError,
    request_grammar,
    response_format_schema,
    schema_gbnf,
    tool_call_gbnf,
    vocab_check,
)
from maestro.agents.judge import verdict_schema
from maestro.agents.settings import LLMSettings
from maestro.domains import Domain, library_ids, library_path, load_domain
from tests.agents.bounded import within

llama_cpp = pytest.importorskip("llama_cpp")


class Vocabulary:
    """The real model's tokenizer and llama.cpp's grammar sampler, without the weights."""

    def __init__(self) -> None:
        from maestro.agents.embedded import model_path

        self.llm = llama_cpp.Llama(
            model_path=str(model_path(LLMSettings().embedded)), vocab_only=True, verbose=False
        )
        self.vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self.eos = self.llm.token_eos()

    def accepts(self, gbnf: str, text: str) -> bool:
        """Whether the grammar lets a model write exactly ``text`` and then stop."""
        sampler = llama_cpp.llama_sampler_init_grammar(self.vocab, gbnf.encode(), b"root")
        assert sampler, "llama.cpp refused the grammar"
        try:
            tokens = self.llm.tokenize(text.encode(), add_bos=False, special=False)
            for token in [*tokens, self.eos]:
                data = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 0.0, 0.0))
                candidates = llama_cpp.llama_token_data_array(data, 1, -1, False)
                llama_cpp.llama_sampler_apply(sampler, ctypes.byref(candidates))
                if math.isinf(data[0].logit):
                    return False
                if token != self.eos:
                    llama_cpp.llama_sampler_accept(sampler, token)
            return True
        finally:
            llama_cpp.llama_sampler_free(sampler)


@pytest.fixture(scope="module")
def vocab() -> Iterator[Vocabulary]:
    v = Vocabulary()
    yield v
    v.llm.close()


# ----- response_format schemas ------------------------------------------------------------------


class Severity(StrEnum):
    low = "low"
    high = "high"


class Finding(BaseModel):
    tool: str | None = None
    severity: Severity
    note: str = Field(pattern=r"[a-z]")  # unanchored, as pydantic users write them


class ReviewAnswer(BaseModel):
    """The shapes pydantic gives a stage's answer: Literal, enum, Optional, nested $defs."""

    verdict: Literal["accept", "reject"]
    findings: list[Finding]
    missing_operation: str | None = None
    scores: dict[str, int] = Field(default_factory=dict)


def test_a_pydantic_answer_model_becomes_a_grammar_that_admits_its_instances(
    vocab: Vocabulary,
) -> None:
    gbnf = schema_gbnf(ReviewAnswer.model_json_schema())
    vocab_check(vocab.llm)(gbnf)
    good = ReviewAnswer(
        verdict="reject",
        findings=[Finding(severity=Severity.high, note="no lookup tool")],
        missing_operation="find_patient",
        scores={"a": 1},
    )
    # The converter writes required properties first, then the optional ones set.
    assert vocab.accepts(gbnf, good.model_dump_json(exclude_defaults=True))
    assert vocab.accepts(gbnf, '{"verdict": "accept", "findings": []}')
    for bad in [
        '{"verdict": "maybe", "findings": []}',  # not a Literal value
        '{"verdict": "accept", "findings": [{"severity": "mid", "note": "x"}]}',  # not an enum
        '{"verdict": "accept", "findings": [{"severity": "low", "note": "ABC"}]}',  # pattern
        '{"verdict": "accept"}',  # a required field missing
        '{"verdict": "accept", "findings": [], "extra": 1}',
        'Sure! {"verdict": "accept", "findings": []}',  # text around the JSON
    ]:
        assert not vocab.accepts(gbnf, bad), bad


@pytest.mark.parametrize(
    ("pattern", "good", "bad"),
    [
        (r"^\d{4}-\d{2}-\d{2}$", "2026-01-05", "2026-1-05"),
        (r"^\S+@\S+$", "a@b.c", "a b@c"),
        (r"^[A-Z]\w*$", "Rental_2", "Rental-2"),
        (r"^[\d_]+$", "12_3", "12a"),
        (r"^\D\s\W$", "a !", "1 !"),
    ],
)
def test_shorthand_classes_in_patterns_are_honoured(
    vocab: Vocabulary, pattern: str, good: str, bad: str
) -> None:
    # The converter passes \d, \w, \s through verbatim, which llama.cpp refuses to parse.
    gbnf = schema_gbnf({"type": "string", "pattern": pattern})
    vocab_check(vocab.llm)(gbnf)
    assert vocab.accepts(gbnf, json.dumps(good))
    assert not vocab.accepts(gbnf, json.dumps(bad))


class Node(BaseModel):
    name: str
    children: list[Node] = Field(default_factory=list)


def test_a_recursive_model_becomes_a_grammar(vocab: Vocabulary) -> None:
    # pydantic writes it as a root $ref into $defs, which the converter alone cannot resolve.
    gbnf = schema_gbnf(Node.model_json_schema())
    tree = '{"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}'
    assert vocab.accepts(gbnf, tree)
    assert not vocab.accepts(gbnf, '{"name": "a", "children": [{"children": []}]}')


def grammar_order(schema: dict[str, Any], value: Any, root: dict[str, Any]) -> Any:
    """``value`` with every object's keys in the order the grammar writes them: the required
    properties, then the optional ones, each in the schema's order (a model decoding under the
    grammar writes them so; the parsers do not care)."""
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    if "anyOf" in schema:
        kind = "object" if isinstance(value, dict) else "array" if isinstance(value, list) else None
        branch = next((b for b in schema["anyOf"] if kind and _kind(b, root) == kind), None)
        return value if branch is None else grammar_order(branch, value, root)
    if isinstance(value, list):
        return [grammar_order(schema.get("items", {}), v, root) for v in value]
    if not isinstance(value, dict):
        return value
    props = schema.get("properties", {})
    required = schema.get("required", [])
    keys = [k for k in props if k in required] + [k for k in props if k not in required]
    keys += [k for k in value if k not in props]
    other = schema.get("additionalProperties")
    return {
        k: grammar_order(props.get(k, other if isinstance(other, dict) else {}), value[k], root)
        for k in keys
        if k in value
    }


def _kind(schema: dict[str, Any], root: dict[str, Any]) -> Any:
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema.get("type")


def _stage_answers() -> list[tuple[str, dict[str, Any], list[BaseModel], str]]:
    """Every codegen JSON stage: the response_format it sends, answers its parser accepts (as
    the model would write them: pydantic's field order), and one its grammar must refuse."""
    from maestro.agents.codegen.answers import ReviewAnswer as Review
    from maestro.agents.codegen.answers import response_format
    from maestro.agents.codegen.blueprint import BlueprintDraft
    from maestro.agents.codegen.normalise import parse_blueprint
    from maestro.agents.codegen.scenario_prompts import RefusalDraft, ScenarioDraft
    from maestro.agents.codegen.state import DEFAULT_CLOCK
    from tests.synthesis.scripted_team import BLUEPRINT

    bp = parse_blueprint(BLUEPRINT, clock=DEFAULT_CLOCK)
    scenario = ScenarioDraft(
        persona="Anna, a commuter",
        reason_for_call="cancel her booking",
        known_info="booking BK1001",
        task_instructions="Ask to cancel.",
        nl_assertions=["The agent cancels BK1001."],
    )
    refusal = RefusalDraft(
        candidate=2,
        rule="no refunds after departure",
        communicate_info=["departed"],
        **scenario.model_dump(exclude={"unknown_info"}),
    )
    return [
        (
            "blueprint",
            response_format("blueprint", BlueprintDraft),
            [
                BlueprintDraft.model_validate(
                    bp.model_dump(include=set(BlueprintDraft.model_fields))
                )
            ],
            '{"domain_id": "x"}',
        ),
        (
            "review",
            response_format("review", Review),
            [Review(verdict="ok"), Review(verdict="fix", stage="tools", tool="t", problem="p")],
            '{"verdict": "maybe"}',
        ),
        ("scenario", response_format("scenario", ScenarioDraft), [scenario], '{"persona": 1}'),
        (
            "refusal",
            response_format("refusal", RefusalDraft),
            [RefusalDraft(candidate=None), refusal],
            '{"candidate": "2"}',
        ),
    ]


@pytest.mark.parametrize(
    ("stage", "fmt", "answers", "bad"), [pytest.param(*c, id=c[0]) for c in _stage_answers()]
)
def test_every_codegen_stage_s_response_format_becomes_a_grammar_admitting_its_answers(
    vocab: Vocabulary, stage: str, fmt: dict[str, Any], answers: list[BaseModel], bad: str
) -> None:
    # What the synthesis sends is what the embedded server converts: a schema it could not would
    # be a 400 at that stage, so this runs the stage's own format through the request path.
    schema = response_format_schema(fmt)
    assert schema is not None, stage
    gbnf = schema_gbnf(schema)
    vocab_check(vocab.llm)(gbnf)
    for answer in answers:
        text = json.dumps(grammar_order(schema, answer.model_dump(mode="json"), schema))
        assert vocab.accepts(gbnf, text), f"{stage}: {text[:300]}"
    assert not vocab.accepts(gbnf, bad), stage


def test_the_refusal_grammar_ends_its_lists_where_the_checks_do(vocab: Vocabulary) -> None:
    # The embedded model once repeated one assertion until its token cap under this grammar.
    from maestro.agents.codegen.answers import response_format
    from maestro.agents.codegen.scenario_prompts import RefusalDraft

    schema = response_format_schema(response_format("refusal", RefusalDraft))
    assert schema is not None
    gbnf = schema_gbnf(schema)
    draft = RefusalDraft(
        candidate=1,
        rule="r",
        communicate_info=["c"],
        persona="p",
        reason_for_call="w",
        known_info="k",
        task_instructions="t",
        nl_assertions=["a"] * 5,
    )

    def text(**changes: Any) -> str:
        return json.dumps(grammar_order(schema, {**draft.model_dump(), **changes}, schema))

    assert vocab.accepts(gbnf, text())
    assert vocab.accepts(gbnf, json.dumps({"candidate": None}))
    assert not vocab.accepts(gbnf, text(nl_assertions=["a"] * 6))
    assert not vocab.accepts(gbnf, text(communicate_info=["c"] * 4))
    assert not vocab.accepts(gbnf, text(nl_assertions=[]))


def test_the_judge_schema_admits_the_verdicts_the_prompt_asks_for(vocab: Vocabulary) -> None:
    gbnf = schema_gbnf(verdict_schema(2))
    two = '{"verdicts": [{"index": 1, "met": true, "reason": "a"}, {"index": 2, "met": false, "reason": "b"}]}'
    assert vocab.accepts(gbnf, two)
    assert not vocab.accepts(gbnf, two.replace('"index": 2', '"index": 3'))
    assert not vocab.accepts(gbnf, '{"verdicts": [{"index": 1, "met": true, "reason": "a"}]}')
    assert not vocab.accepts(gbnf, two.replace("true", '"yes"'))


def test_the_failure_review_schema_admits_its_causes_and_labels_only(vocab: Vocabulary) -> None:
    from maestro.agents.review import CAUSES, response_format, review_schema

    schema = response_format_schema(response_format(review_schema(["A1", "N1"])))
    assert schema is not None
    gbnf = schema_gbnf(schema)
    vocab_check(vocab.llm)(gbnf)
    for cause in CAUSES:
        good = {
            "cause": cause,
            "reason": "It misread.",
            "evidence": "the agent said",
            "about": "A1",
        }
        assert vocab.accepts(gbnf, json.dumps(good))
    good = {"cause": CAUSES[0], "reason": "r", "evidence": "e", "about": "N1"}
    assert not vocab.accepts(gbnf, json.dumps({**good, "cause": "policy"}))
    assert not vocab.accepts(gbnf, json.dumps({**good, "about": "A2"}))
    assert not vocab.accepts(gbnf, json.dumps({**good, "reason": ""}))


def test_json_object_admits_any_object_and_nothing_else(vocab: Vocabulary) -> None:
    schema = response_format_schema({"type": "json_object"})
    assert schema is not None
    gbnf = schema_gbnf(schema)
    assert vocab.accepts(gbnf, '{"a": [1, {"b": null}]}')
    assert not vocab.accepts(gbnf, "[1, 2]")
    assert not vocab.accepts(gbnf, "hello")


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "object", "properties": {"x": {"type": "decimal"}}}, "at x: Unrecognized schema"),
        ({"type": "object", "properties": {"a": {"not": {"type": "string"}}}}, "at a:"),
        ({"$ref": "#/$defs/Nope"}, "at a $ref: Error resolving ref"),
        ({"$ref": "https://example.com/s.json"}, "Fetching remote schemas is not allowed"),
        ({"type": "array", "items": [1]}, "a schema must be a JSON object, not 1"),
    ],
)
def test_a_schema_the_grammar_cannot_express_is_an_error_naming_where(
    schema: dict[str, Any], problem: str
) -> None:
    with pytest.raises(GrammarError, match="cannot be decoded with a grammar") as err:
        schema_gbnf(schema)
    assert problem in str(err.value)


def tool_with(parameter: dict[str, Any]) -> list[dict[str, Any]]:
    params = {"type": "object", "properties": {"x": parameter}, "required": ["x"]}
    return [{"type": "function", "function": {"name": "f", "parameters": params}}]


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        # The converter's parser looped forever on these: one request hung the server.
        ("^a]b$", "a lone ] at 1"),
        ("a}", "a lone } at 1"),
        ("[]a]", "the class at 0 starts with ]"),
        ("^[^]x]$", "the class at 0 starts with ]"),
        # llama.cpp's parser overflowed its stack on the nesting these become: a crash.
        ("^a{0,30000}$", "more than the 10000 repetitions"),
        ("^.{0,5000}$", "5000 optional repetitions, more than the 1000"),
        # And what the converter would write as something else, or llama.cpp refuse unexplained.
        ("a{2,1}", "a maximum below its minimum"),
        ("(?=a)b", "lookarounds, non-capturing and named groups are not supported"),
        ("(a)\\1", "a backreference \\1 at 3"),
        ("a\\", "it ends in a lone \\"),
        ("*a", "the * at 0 has nothing to repeat"),
        ("a**", "the * at 2 repeats a repetition"),
        ("(ab", "a ( is not closed"),
        ("ab)", "the ) at 2 closes no group"),
        ("[ab", "the [ at 0 is not closed"),
        ("a{x}", "that is not a repetition"),
        ("x" * 20_001, "20001 characters long"),
        # Fifth red team: llama.cpp aborted the server on a NUL no token can make, and its
        # grammar check stalled generation on a repetition of a repetition (0.02 s a token,
        # then 0.6, 2.3, ... past 57 s by the second token at 200).
        ("^\\x00$", "a NUL character (\\x00) at 0, which no token can make"),
        ("a\\0", "a NUL character (\\0) at 1"),
        ("^[\\u0000]$", "the class at 0 holds only a NUL character"),
        ("^(a{0,200}){0,200}$", "the {0,200} at 10 repeats a group that holds a repetition"),
        ("(a+)+", "the + at 4 repeats a group that holds a repetition of its own"),
        ("((a{0,100}){0,100}){0,100}", "the {0,100} at 11 repeats a group"),
    ],
)
def test_a_tool_parameter_pattern_the_converter_cannot_take_is_refused_naming_it(
    pattern: str, problem: str
) -> None:
    err = within(10, lambda: tool_call_gbnf(tool_with({"type": "string", "pattern": pattern})))
    assert isinstance(err, GrammarError), err
    assert str(err).startswith(
        "tool 'f' parameters cannot be decoded with a grammar at /properties/x"
    )
    assert problem in str(err)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        # The converter writes a JSON escape into the grammar raw: a NUL aborted the server.
        ({"const": "a\u0000b"}, "/const: a string value holds a NUL"),
        ({"enum": ["ok", "\ud800"]}, "/enum: a string value holds the character '\\ud800'"),
        ({"const": {"k": ["a\nb"]}}, "/const: a string value holds the character '\\n'"),
    ],
)
def test_a_const_or_enum_string_the_grammar_would_write_raw_is_refused(
    value: dict[str, Any], problem: str
) -> None:
    err = within(10, lambda: tool_call_gbnf(tool_with(value), "required"))
    assert isinstance(err, GrammarError), err
    assert f"at /properties/x{problem}" in str(err)
    schema_gbnf({"enum": ["a", "b c", "d-e"]})  # ordinary values pass


def test_a_refused_response_format_pattern_is_an_error_of_the_request() -> None:
    fmt = {"type": "json_schema", "json_schema": {"schema": tool_with({"pattern": "]"})[0]}}
    cache = GrammarCache(lambda gbnf: None)
    err = within(10, lambda: request_grammar({"response_format": fmt}, cache))
    assert isinstance(err, GrammarError)
    assert "at /function/parameters/properties/x: pattern ']': a lone ]" in str(err)


def test_a_refused_pattern_is_named_on_one_line_with_its_control_characters_escaped() -> None:
    err = within(10, lambda: schema_gbnf({"type": "string", "pattern": "a\n\x1b]2;x\u2028"}))
    assert isinstance(err, GrammarError)
    assert not any(c in str(err) for c in "\n\x1b\u2028"), str(err)
    assert "pattern 'a\\n\\x1b]2;x\\u2028': a lone ] at 3" in str(err)


@pytest.mark.parametrize(
    ("parameter", "problem"),
    [
        ({"type": "string", "maxLength": 30_000}, "maxLength 30000 asks for more than the 10000"),
        ({"type": "string", "maxLength": 1_500}, "maxLength 1500 asks for 1500 optional"),
        ({"type": "string", "minLength": 10**7}, "minLength 10000000 asks for more than"),
        ({"type": "array", "items": {}, "maxItems": 100_000}, "maxItems 100000 asks for more"),
        (
            {"type": "string", "minLength": 5, "maxLength": 2},
            "minLength 5, maxLength 2 asks for a maximum below",
        ),
    ],
)
def test_a_repetition_count_llama_cpp_would_crash_or_stall_on_is_refused(
    parameter: dict[str, Any], problem: str
) -> None:
    err = within(10, lambda: tool_call_gbnf(tool_with(parameter)))
    assert isinstance(err, GrammarError), err
    assert f"at /properties/x: {problem}" in str(err)


@pytest.mark.parametrize(
    ("pattern", "gbnf"),
    [
        (
            r"^\d{4}-\d{2}-\d{2}$",
            'root ::= "\\"" root-1 root-1 root-1 root-1 "-" root-1 root-1 "-" root-1 root-1 '
            '"\\"" space\nroot-1 ::= [0-9]\nspace ::= " "?',
        ),
        (
            "[a-z]",
            'dot ::= [^\\x0A\\x0D]\nroot ::= "\\"" dot* [a-z] dot* "\\"" space\nspace ::= " "?',
        ),
        (r"^[\d_]+$", 'root ::= "\\"" [0-9_]+ "\\"" space\nspace ::= " "?'),
    ],
)
def test_an_ordinary_pattern_makes_the_grammar_it_made_before_the_checks(
    pattern: str, gbnf: str
) -> None:
    assert schema_gbnf({"type": "string", "pattern": pattern}).strip() == gbnf


def test_ordinary_repetitions_and_quantifiers_pass_the_checks() -> None:
    for pattern in ["^a{0,1000}$", "(a|b){2,}", "^x*?y+?z??$", r"^(\d{3}-)*\d{4}$", "(a+)?b"]:
        schema_gbnf({"type": "string", "pattern": pattern})
    schema_gbnf({"type": "string", "minLength": 3_000, "maxLength": 4_000})
    schema_gbnf({"type": "array", "items": {"type": "string"}, "maxItems": 1_000})


@pytest.mark.parametrize(
    ("response_format", "problem"),
    [
        ({"type": "xml"}, "response_format.type 'xml' is not one of"),
        ({"type": "json_schema"}, "response_format.json_schema.schema is missing"),
        ({"type": "json_schema", "json_schema": {"schema": "x"}}, "is missing or not an object"),
        ("json", "response_format must be a JSON object"),
    ],
)
def test_a_malformed_response_format_is_an_error(response_format: Any, problem: str) -> None:
    with pytest.raises(GrammarError, match=problem):
        response_format_schema(response_format)


def test_text_and_a_missing_response_format_ask_for_no_grammar() -> None:
    assert response_format_schema(None) is None
    assert response_format_schema({"type": "text"}) is None


# ----- tool calls -------------------------------------------------------------------------------

CALL = '{"name": "get_order", "arguments": {"order_id": "O1"}}'


def test_with_tools_the_answer_is_a_message_or_one_valid_call(
    vocab: Vocabulary, toy: Domain
) -> None:
    gbnf = tool_call_gbnf(toy.toolkit.schemas())
    admitted = [
        f"<tool_call>\n{CALL}\n</tool_call>",
        CALL,
        "Your order O1 has shipped.",
        f"Let me look that up.\n<tool_call>{CALL}</tool_call>",
        '{"name": "place_order", "arguments": {"customer_id": "C1", "skus": ["S1", "S2"]}}',
        '{"name": "cancel_order", "arguments": {"order_id": "O1", "reason": "late"}}',
    ]
    for text in admitted:
        assert vocab.accepts(gbnf, text), text
    refused = [
        '{"name": "drop_tables", "arguments": {}}',  # not an offered tool
        '{"name": "get_order", "arguments": {"order_id": 1}}',  # wrong type
        '{"name": "get_order", "arguments": {}}',  # required argument missing
        '{"name": "get_order", "arguments": {"order_id": "O1", "x": 1}}',  # unknown argument
        '{"name": "place_order", "arguments": {"customer_id": "C1", "skus": "S1"}}',
        f"<tool_call>{CALL}</tool_call><tool_call>{CALL}</tool_call>",  # two calls
        f"<tool_call>{CALL}</tool_call> Done.",  # text after the call
        f"```json\n{CALL}\n```",  # a fence is steered into a plain call
        '{"order_id": "O1"}',
    ]
    for text in refused:
        assert not vocab.accepts(gbnf, text), text


def test_every_library_domain_s_tools_become_one_grammar(vocab: Vocabulary) -> None:
    check = vocab_check(vocab.llm)
    for domain_id in library_ids():
        domain = load_domain(library_path(domain_id), check_gold=False)
        tools = domain.toolkit.schemas()
        gbnf = tool_call_gbnf(tools)
        check(gbnf)
        name = tools[0]["function"]["name"]
        assert not vocab.accepts(gbnf, f'{{"name": "{name}", "arguments": {{"nope": 1}}}}')


def test_tool_choice_required_or_named_allows_only_calls(vocab: Vocabulary, toy: Domain) -> None:
    tools = toy.toolkit.schemas()
    required = tool_call_gbnf(tools, "required")
    assert vocab.accepts(required, CALL)
    assert not vocab.accepts(required, "Your order shipped.")
    named = tool_call_gbnf(tools, {"type": "function", "function": {"name": "list_orders"}})
    assert vocab.accepts(named, '{"name": "list_orders", "arguments": {"customer_id": "C1"}}')
    assert not vocab.accepts(named, CALL)
    with pytest.raises(GrammarError, match="tool_choice names 'nope'"):
        tool_call_gbnf(tools, {"type": "function", "function": {"name": "nope"}})


def test_tools_and_a_response_format_allow_a_call_or_the_json_answer(
    vocab: Vocabulary, toy: Domain
) -> None:
    gbnf = tool_call_gbnf(
        toy.toolkit.schemas(),
        answer={
            "$ref": "#/$defs/A",
            "$defs": {
                "A": {
                    "type": "object",
                    "properties": {"ok": {"type": "boolean"}},
                    "required": ["ok"],
                }
            },
        },
    )
    assert vocab.accepts(gbnf, CALL)
    assert vocab.accepts(gbnf, '{"ok": true}')
    assert not vocab.accepts(gbnf, "All done.")


def test_tools_whose_definitions_share_a_name_keep_their_own_shapes(vocab: Vocabulary) -> None:
    def tool(name: str, item: dict[str, Any]) -> dict[str, Any]:
        params = {
            "type": "object",
            "properties": {"item": {"$ref": "#/$defs/Item"}},
            "required": ["item"],
            "$defs": {"Item": item},
        }
        return {"type": "function", "function": {"name": name, "parameters": params}}

    gbnf = tool_call_gbnf(
        [
            tool(
                "by_id",
                {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            ),
            tool(
                "by_n",
                {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            ),
        ]
    )
    assert vocab.accepts(gbnf, '{"name": "by_id", "arguments": {"item": {"id": "x"}}}')
    assert vocab.accepts(gbnf, '{"name": "by_n", "arguments": {"item": {"n": 3}}}')
    assert not vocab.accepts(gbnf, '{"name": "by_n", "arguments": {"item": {"id": "x"}}}')


def test_a_tool_without_a_name_is_an_error() -> None:
    with pytest.raises(GrammarError, match=r"tools\[0\] has no function.name"):
        tool_call_gbnf([{"type": "function", "function": {}}])
    with pytest.raises(GrammarError, match=r"tool 'f' parameters cannot be decoded.*at x"):
        tool_call_gbnf(
            [
                {
                    "type": "function",
                    "function": {
                        "name": "f",
                        "parameters": {"type": "object", "properties": {"x": {"type": "decimal"}}},
                    },
                }
            ]
        )


# ----- the cache and the request --------------------------------------------------------------


def test_grammars_are_built_and_checked_once_per_schema(vocab: Vocabulary) -> None:
    built: list[str] = []
    cache = GrammarCache(vocab_check(vocab.llm), capacity=2)

    def build(schema: dict[str, Any]) -> str:
        built.append(json.dumps(schema))
        return schema_gbnf(schema)

    a, b, c = ({"type": t} for t in ("string", "integer", "boolean"))
    first = cache.get(["schema", a], lambda: build(a))
    assert cache.get(["schema", a], lambda: build(a)) is first
    cache.get(["schema", b], lambda: build(b))
    cache.get(["schema", c], lambda: build(c))  # a is the least recently used: evicted
    assert len(cache) == 2
    cache.get(["schema", a], lambda: build(a))
    assert (cache.hits, cache.misses, len(built)) == (1, 4, 4)


def test_a_grammar_llama_cpp_refuses_is_an_error_remembered_apart_from_the_grammars(
    vocab: Vocabulary,
) -> None:
    cache = GrammarCache(vocab_check(vocab.llm))
    built: list[str] = []

    def bad() -> str:
        built.append("bad")
        return "root ::= undefined-rule"

    for _ in range(2):
        with pytest.raises(GrammarError, match=r"llama\.cpp could not parse the grammar"):
            cache.get("bad", bad)
    assert len(cache) == 0
    assert (built, cache.hits, cache.misses) == (["bad"], 1, 1)


def test_a_hostile_schema_refused_once_is_refused_again_without_building() -> None:
    cache = GrammarCache(lambda gbnf: None)
    fmt = {"type": "json_schema", "json_schema": {"schema": {"type": "string", "pattern": "]"}}}
    errors = []
    for _ in range(2):
        with pytest.raises(GrammarError, match="a lone ]") as err:
            request_grammar({"response_format": fmt}, cache)
        errors.append(str(err.value))
    assert errors[0] == errors[1]
    assert (cache.hits, cache.misses, len(cache)) == (1, 1, 0)
    tools = tool_with({"type": "string", "pattern": "}"})
    assert request_grammar({"tools": tools}, cache) is None  # unconstrained, as before
    assert request_grammar({"tools": tools}, cache) is None
    assert (cache.hits, cache.misses) == (2, 2)


def test_concurrent_requests_for_one_shape_build_it_once() -> None:
    cache = GrammarCache(lambda gbnf: None)
    built: list[int] = []

    def slow() -> str:
        built.append(1)
        time.sleep(0.3)
        return 'root ::= "x"'

    threads = [threading.Thread(target=cache.get, args=("k", slow)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert (len(built), cache.misses, cache.hits) == (1, 1, 3)


def test_a_grammar_too_large_for_llama_cpp_to_parse_quickly_is_refused() -> None:
    cache = GrammarCache(lambda gbnf: None)
    with pytest.raises(GrammarError, match="more than the 256 KB the embedded model takes"):
        cache.get("big", schema_gbnf, {"enum": list(range(40_000))})


def test_the_settings_switch_each_constraint_off(vocab: Vocabulary, toy: Domain) -> None:
    cache = GrammarCache(vocab_check(vocab.llm))
    tools = toy.toolkit.schemas()
    fmt = {"type": "json_object"}
    assert request_grammar({"tools": tools}, cache) is not None
    assert request_grammar({"tools": tools}, cache, tool_calls=False) is None
    assert request_grammar({"tools": tools, "tool_choice": "none"}, cache) is None
    assert request_grammar({"response_format": fmt}, cache) is not None
    assert request_grammar({"response_format": fmt}, cache, schemas=False) is None
    assert request_grammar({"messages": []}, cache) is None


def test_tools_the_grammar_cannot_express_are_answered_unconstrained(vocab: Vocabulary) -> None:
    cache = GrammarCache(vocab_check(vocab.llm))
    odd = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {"type": "object", "properties": {"x": {"not": {}}}},
            },
        }
    ]
    assert request_grammar({"tools": odd}, cache) is None
    with pytest.raises(GrammarError):  # asked for a format: the error is the caller's to see
        request_grammar({"tools": odd, "response_format": {"type": "json_object"}}, cache)
