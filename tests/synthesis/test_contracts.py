"""A prompt and its parser are one contract: for every stage, the shape the prompt text shows
is taken out of the prompt and fed to the stage's parser, and to the JSON Schema the stage sends
as ``response_format``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
from pydantic import BaseModel

from maestro.agents.codegen.answers import (
    SCHEMA_KEYWORDS,
    ParseError,
    ReviewAnswer,
    clean_schema,
    extract_code,
    parse_review,
    policy_problem,
    response_format,
)
from maestro.agents.codegen.blueprint import BlueprintDraft, BlueprintError
from maestro.agents.codegen.generator import (
    GENERATOR_IMPORTS,
    Sizes,
    generation_order,
    normalise_generator,
    run_generator,
)
from maestro.agents.codegen.normalise import parse_blueprint
from maestro.agents.codegen.prompts import (
    blueprint_messages,
    data_messages,
    policy_messages,
    review_messages,
    tool_messages,
)
from maestro.agents.codegen.scenario_prompts import (
    DraftError,
    InfoDraft,
    info_prompt,
    refusal_prompt,
    walk_prompt,
)
from maestro.agents.codegen.scenarios import (
    RefusalDraft,
    ScenarioDraft,
    _info_task,
    parse_draft,
    plan_walks,
)
from maestro.agents.codegen.state import SynthesisConfig
from maestro.agents.codegen.tools_code import normalise_tool
from maestro.domains import Domain
from maestro.scoring.conformance import check_task
from tests.synthesis import scripted_team as team

CONFIG = SynthesisConfig()
#: The keywords every structured-output server (llama.cpp's converter included) accepts.
ALLOWED = SCHEMA_KEYWORDS


def json_objects(text: str) -> list[Any]:
    """Every JSON object written in a prompt, outermost first."""
    decoder = json.JSONDecoder()
    found, i = [], 0
    while (i := text.find("{", i)) != -1:
        try:
            value, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i += 1
            continue
        found.append(value)
        i = end
    return found


def prompt(messages: list[dict[str, str]]) -> str:
    return messages[-1]["content"]


def keywords(schema: Any) -> set[str]:
    if isinstance(schema, list):
        return set().union(*(keywords(s) for s in schema)) if schema else set()
    if not isinstance(schema, dict):
        return set()
    out = set(schema)
    for key, value in schema.items():
        if key in ("properties", "$defs"):
            out |= set().union(*(keywords(v) for v in value.values())) if value else set()
        else:
            out |= keywords(value)
    return out


def schema_of(fmt: dict[str, Any]) -> dict[str, Any]:
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert keywords(schema) <= ALLOWED, keywords(schema) - ALLOWED
    return schema


def test_the_blueprint_prompts_example_is_a_valid_blueprint_and_fits_its_schema() -> None:
    text = prompt(blueprint_messages(team.BRIEF, "transport", CONFIG.clock, None, None))
    (example,) = [o for o in json_objects(text) if "entities" in o]
    bp = parse_blueprint(example, clock=CONFIG.clock)
    assert len(bp.operations) == 11
    schema = schema_of(response_format("blueprint", BlueprintDraft))
    jsonschema.validate(example, schema)
    assert "Monday 2026-01-05" in text  # the clock, as every stage states it


def test_the_data_prompts_program_shape_is_what_the_host_runs(tmp_path: Path) -> None:
    bp = team.blueprint(CONFIG)
    text = prompt(data_messages(bp, CONFIG.limits(), None, None))
    order = [e.table for e in generation_order(bp)]
    # The tables in the order they are made, each a field list with its types and windows.
    assert [t for t in order if f"- {t} (" in text] == order
    assert text.index(f"- {order[0]} (") < text.index(f"- {order[-1]} (")
    assert "from 2025-12-06 to 2026-03-06" in text  # a window, in dates around the clock
    assert "make_<table>(db, rng, n)" in text and "finish_<table>(db, rng, record)" in text
    # Every helper the prompt names is one the sandbox lets the program import.
    named = set(re.findall(r"\b([a-z_]+)\(rng", text))
    assert named <= set(GENERATOR_IMPORTS["maestro.domains.worldgen"]), named
    assert named >= {"person", "place", "phone", "street_address", "birth_date", "fake"}
    # A program written to the stated shape runs; one that leaves a table out is told which.
    program = (
        "\n".join(f"def make_{t}(db, rng, n):\n    return []\n" for t in order)
        + "def finish_bookings(db, rng, record):\n    return None\n"
    )
    db = run_generator(bp, normalise_generator(bp, program), Sizes(3, 3), tmp_path)
    assert set(db) == set(order)
    with pytest.raises(ParseError, match="defines no make_refunds"):
        normalise_generator(bp, program.replace("def make_refunds", "def make_refund"))
    with pytest.raises(ParseError, match="no imports"):
        normalise_generator(bp, "import os\n" + program)


def _quote_returning(n: int) -> dict[str, Any]:
    raw = json.loads(json.dumps(team.BLUEPRINT))
    quote = next(op for op in raw["operations"] if op["kind"] == "quote")
    quote["returns"] = {f"v{i}": "booking_id.fare_paid" for i in range(n)}
    return raw


def _create_taking_its_key() -> dict[str, Any]:
    raw = json.loads(json.dumps(team.BLUEPRINT))
    book = next(op for op in raw["operations"] if op["name"] == "book_sailing")
    book["params"]["booking_id"] = "str"
    book["requires"].append({"check": "$booking_id != ''"})
    return raw


@pytest.mark.parametrize(
    ("stated", "kept", "broken", "told"),
    [
        ('returns" names\n    each value it computes (at most 8)', 8, 9, "at most 8 items"),
        ("the table's key is\n    never one of its params", None, None, "cannot be a parameter"),
    ],
)
def test_each_blueprint_rule_is_stated_and_its_refusal_says_it(
    stated: str, kept: int | None, broken: int | None, told: str
) -> None:
    text = prompt(blueprint_messages(team.BRIEF, "transport", CONFIG.clock, None, None))
    assert stated in text
    if kept is not None and broken is not None:
        parse_blueprint(_quote_returning(kept), clock=CONFIG.clock)  # written to the rule
        bad = _quote_returning(broken)
    else:
        bad = _create_taking_its_key()
    with pytest.raises(BlueprintError, match=told):
        parse_blueprint(bad, clock=CONFIG.clock)


def _transfer_rule(*refuse_when: str) -> dict[str, Any]:
    raw = json.loads(json.dumps(team.BLUEPRINT))
    raw["agent_rules"].append(
        {
            "operation": "request_transfer",
            "rule": "Transfers are requested at the port office.",
            "refuse_when": [{"check": c} for c in refuse_when],
        }
    )
    return raw


def test_an_agent_rule_never_refuses_outright_what_its_operations_check_allows() -> None:
    """Car rental run 10's policy allowed extra drivers while the car was out (the operation's
    check) and forbade them (an agent rule): the blueprint goes back naming both."""
    text = prompt(blueprint_messages(team.BRIEF, "transport", CONFIG.clock, None, None))
    assert "A rule never refuses outright a value the operation's own check names as" in text
    # Written to the rule: the status refused only together with something else.
    parse_blueprint(
        _transfer_rule("booking_id.status = 'confirmed' and $new_sailing_id.seats_left < 5"),
        clock=CONFIG.clock,
    )
    parse_blueprint(
        _transfer_rule("booking_id.status = 'confirmed'", "$new_sailing_id.seats_left < 5"),
        clock=CONFIG.clock,
    )
    with pytest.raises(BlueprintError) as err:
        parse_blueprint(_transfer_rule("booking_id.status = 'confirmed'"), clock=CONFIG.clock)
    assert (
        "refuses request_transfer whenever status is 'confirmed', which request_transfer's "
        "requires[0] accepts by name"
    ) in str(err.value)


def test_an_enum_effect_is_a_constant_as_stated_and_an_expression_there_is_refused() -> None:
    """The airline's answerer wrote a cancellation whose refund method was if(...) of two enum
    values: refused by a rule the prompt did not state."""
    text = prompt(blueprint_messages(team.BRIEF, "transport", CONFIG.clock, None, None))
    assert "never\n    an enum field's value: an enum takes a constant" in text
    raw = json.loads(json.dumps(team.BLUEPRINT))
    book = next(op for op in raw["operations"] if op["name"] == "book_sailing")
    assert book["sets"]["new.status"] == "confirmed"  # written to the rule
    parse_blueprint(raw, clock=CONFIG.clock)
    book["sets"]["new.status"] = {"expr": "if($vehicle, 'confirmed', 'cancelled')"}
    with pytest.raises(BlueprintError, match="an enum field takes a constant: when its value"):
        parse_blueprint(raw, clock=CONFIG.clock)


def test_the_data_prompts_constant_rule_is_stated_and_its_refusal_says_it() -> None:
    bp = team.blueprint(CONFIG)
    text = prompt(data_messages(bp, CONFIG.limits(), None, None))
    assert "a constant is a literal" in text and "compute dates inside the functions" in text
    program = team.DATA_PROGRAM
    normalise_generator(bp, "LIMIT = [1, 2, 3]\n" + program)  # a literal: kept
    with pytest.raises(ParseError, match="a top-level constant is a literal"):
        normalise_generator(bp, "START = date(2026, 1, 1)\n" + program)


def test_the_static_checks_rules_are_stated_where_code_is_asked_for(tmp_path: Path) -> None:
    from maestro.domains.sandbox.static import check_tools_source

    bp = team.blueprint(CONFIG)
    data = prompt(data_messages(bp, CONFIG.limits(), None, None))
    tool = prompt(tool_messages(bp, bp.operations[0], None, None))
    for text in (data, tool):
        assert ".format() on anything but a string literal (write f-strings" in text
    ok = "def f(x):\n    return 'Dear {}'.format(x) + f'{x}!'\n"
    assert check_tools_source(ok, "tools.py") == []
    bad = "def f(x, template):\n    return template.format(x)\n"
    (problem,) = check_tools_source(bad, "tools.py")
    assert ".format() is allowed only on a string literal" in str(problem)


def test_the_scenario_and_refusal_prompts_shapes_parse(toy: Domain) -> None:
    walks, plans = plan_walks(toy, n=1, seed=0, refusals=1)
    text = walk_prompt(toy, walks[0])
    (shape,) = json_objects(text.split("exactly these keys:")[1])
    parse_draft(json.dumps(shape), ScenarioDraft)
    jsonschema.validate(shape, schema_of(response_format("scenario", ScenarioDraft)))
    text = refusal_prompt(toy, plans[0].group, None)
    stated = json_objects(text)
    none = next(o for o in stated if o == {"candidate": None})
    (full,) = json_objects(text.split("exactly these keys:")[1])
    schema = schema_of(response_format("refusal", RefusalDraft))
    for answer in (none, full):
        parse_draft(json.dumps(answer), RefusalDraft)
        jsonschema.validate(answer, schema)


def test_the_information_prompts_shape_parses_and_its_rules_refuse_what_they_say(
    toy: Domain,
) -> None:
    walks, _ = plan_walks(toy, n=1, seed=0, asks=1)
    (asked,) = [w for w in walks if w.asks]
    text = info_prompt(toy, asked)
    (shape,) = json_objects(text.split("exactly these keys:")[1])
    parse_draft(json.dumps(shape), InfoDraft)
    jsonschema.validate(shape, schema_of(response_format("information", InfoDraft)))
    assert "never a sentence" in text and "never in known_info" in text
    known = " ".join(str(v) for v in asked.user_values.values())
    answer = json.loads(asked.steps[-1].content)
    row = answer[0] if isinstance(answer, list) else answer
    fact = str(next(v for k, v in row.items() if k == "status"))
    good = {**shape, "known_info": f"I am {known}.", "communicate_info": [fact]}
    task = _info_task(toy, asked, parse_draft(json.dumps(good), InfoDraft))
    assert task.category == "read" and task.evaluation_criteria.communicate_info == [fact]
    assert check_task(toy, task).ok
    for facts, told in [
        (["never shown 7919"], "is not a value of the last answer"),
        ([fact], "is what the customer calls to learn"),
        (["The order has shipped and is on its way to you today."], "is a sentence"),
    ]:
        bad = {**good, "communicate_info": facts}
        if told.startswith("is what"):
            bad["known_info"] += f" It is {fact}."
        with pytest.raises(DraftError, match=told):
            _info_task(toy, asked, parse_draft(json.dumps(bad), InfoDraft))


def test_the_review_prompts_examples_parse() -> None:
    bp = team.blueprint(CONFIG)
    ids = ["ferry_syn0_w001"]
    text = prompt(review_messages(bp, team.POLICY, ["t"], ["x"], None, None, ids))
    examples = [o for o in json_objects(text) if "verdict" in o]
    assert len(examples) == 4
    schema = schema_of(response_format("review", ReviewAnswer))
    owners = []
    for example in examples:
        jsonschema.validate(example, schema)
        verdict = parse_review(json.dumps(example), [op.name for op in bp.operations], ids)
        owners.append((verdict.owner, verdict.tasks) if verdict else None)
    assert owners == [
        None,
        ("tools:find_passenger", ()),
        ("blueprint", ()),
        ("tasks", ("ferry_syn0_w001",)),
    ]


def test_the_tool_prompts_header_is_what_the_host_accepts() -> None:
    bp = team.blueprint(CONFIG)
    for op in bp.operations:
        text = prompt(tool_messages(bp, op, None, None))
        header = text.split("Start exactly with:\n")[1].split("\nAnswer with")[0]
        code = extract_code(f"```python\n{header}\n    return db.get('x', 'y')\n```")
        assert normalise_tool(bp, op, code).startswith(f"@tool('{op.tool_kind}')")
        assert "db.today()" in text and "2026-01-05" in text


def test_the_policy_prompts_format_passes_its_check() -> None:
    bp = team.blueprint(CONFIG)
    text = prompt(policy_messages(bp, None, None))
    assert "'# ' title line" in text and "('1. ...')" in text
    assert policy_problem(team.POLICY, len(bp.policy_rules())) is None


def test_the_policy_states_each_rule_once() -> None:
    bp = team.blueprint(CONFIG)
    text = prompt(policy_messages(bp, None, None))
    assert "each rule stated once" in text
    n = len(bp.policy_rules())
    items = [line for line in team.POLICY.splitlines() if line[:1].isdigit()]
    repeated = team.POLICY + f"{n + 1}. " + items[0].split(". ", 1)[1].upper().rstrip(".") + "\n"
    problem = policy_problem(repeated, n)
    assert problem is not None and problem.startswith("the policy states one rule twice: ")
    assert "state each rule once" in problem
    # An agent rule that says a rule again in other case and number is stated once.
    raw = json.loads(json.dumps(team.BLUEPRINT))
    raw["agent_rules"][0]["rule"] = raw["rules"][0].upper().replace(".", "")
    again = team.blueprint(CONFIG, raw)
    assert len(again.policy_rules()) == len(raw["rules"]) + len(raw["agent_rules"]) - 1


def test_schemas_drop_what_grammar_converters_refuse() -> None:
    raw = BlueprintDraft.model_json_schema()
    assert "title" in json.dumps(raw) and "pattern" in json.dumps(raw)
    clean = clean_schema(raw)
    assert keywords(clean) <= ALLOWED
    assert clean["required"] == raw["required"]


def test_every_stage_schema_becomes_a_llama_cpp_grammar() -> None:
    """The embedded server constrains decoding with llama.cpp's JSON-schema converter: each
    stage's schema must convert, and the grammar must parse."""
    grammar = pytest.importorskip("llama_cpp.llama_grammar")
    team.blueprint(CONFIG)
    stages: list[tuple[str, type[BaseModel]]] = [
        ("blueprint", BlueprintDraft),
        ("review", ReviewAnswer),
        ("scenario", ScenarioDraft),
        ("refusal", RefusalDraft),
    ]
    for name, model in stages:
        schema = response_format(name, model)["json_schema"]["schema"]
        gbnf = grammar.json_schema_to_gbnf(json.dumps(schema))
        grammar.LlamaGrammar.from_string(gbnf, verbose=False)


def test_a_tool_prompt_shows_every_table_its_expressions_read() -> None:
    """A capable model was told to count upgrades in an effect of a cancellation, and the
    prompt did not show the upgrades table."""
    from maestro.agents.codegen.normalise import parse_blueprint as parse

    raw = json.loads(json.dumps(team.BLUEPRINT))
    cancel = next(o for o in raw["operations"] if o["name"] == "cancel_booking")
    cancel["sets"]["booking_id.sailing_id.seats_left"] = {
        "add": "1 + 0 * count(memberships where status = 'closed')"
    }
    bp = parse(raw, clock=CONFIG.clock)
    text = prompt(tool_messages(bp, bp.operation("cancel_booking"), None, None))
    assert "- memberships (catalog; key membership_id" in text
    quote = prompt(tool_messages(bp, bp.operation("quote_cancellation"), None, None))
    assert "- sailings (main table; key sailing_id" in quote  # read through a path
