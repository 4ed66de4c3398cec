"""The sandbox as a drop-in for the in-process runtime: library domains replay identically,
sessions flow both ways, children restart; and the static check, which is a linter with good
messages (the process boundary is the security boundary: see test_sandbox_hostile.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from maestro.domains import (
    Domain,
    DomainLoadError,
    Toolkit,
    library_path,
    load_domain,
    replay_calls,
    replay_gold,
)
from maestro.domains.sandbox import (
    SandboxLimits,
    SandboxToolkit,
    check_models_source,
    check_tools_source,
    load_sandboxed_domain,
)
from maestro.domains.sandbox.process import stopped
from maestro.domains.sdk import Ref, TextFormat
from maestro.domains.tau2_export import export_tau2
from maestro.domains.toolgraph import build_tool_graph
from tests.domains.sandbox_support import (
    FIXTURES,
    LIMITS,
    TOY_MODELS,
    TOY_TOOLS,
    make_package,
    tool_source,
    unchecked,
)

EVERYDAY = '''

@tool("read")
def everyday_stdlib(db: Database, day: str) -> str:
    """Ordinary standard-library work a generated tool does.

    Args:
        day: A day, written YYYY-MM-DD.
    """
    import calendar, json, re, statistics
    from datetime import datetime
    from decimal import Decimal
    parsed = datetime.strptime(day, "%Y-%m-%d")
    fee = Decimal("12.345").quantize(Decimal("0.01"))
    mean = statistics.mean([1, 2, 3])
    return json.dumps([calendar.day_name[parsed.weekday()], str(fee), mean, re.sub("-", "", day)])

@tool("read")
def today(db: Database) -> str:
    """The domain's clock.
    """
    return f"{db.today()} {db.now().isoformat()}"

@tool("write")
def add_and_remove(db: Database, sku: str) -> str:
    """Add a product and remove it again.

    Args:
        sku: The new product's sku.
    """
    db.insert("products", {"sku": sku, "title": "t", "price": 1.0, "stock": 1})
    db.delete("products", sku)
    return "ok"
'''


@pytest.fixture(scope="module")
def sandboxed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Domain]:
    """The toy domain and a few more tools, through the sandbox with every check on."""
    root = make_package(tmp_path_factory.mktemp("toy"), "toy", TOY_TOOLS + EVERYDAY)
    with load_sandboxed_domain(root, LIMITS, check_gold=False) as domain:
        yield domain


# ----- drop-in for the in-process runtime -------------------------------------------------------


@pytest.mark.parametrize("domain_id", ["vetclinic", "energy", "hotel"])
def test_library_domains_replay_identically_in_the_sandbox(domain_id: str) -> None:
    reference = load_domain(library_path(domain_id), check_gold=False)
    with load_sandboxed_domain(library_path(domain_id), check_gold=False) as domain:
        assert isinstance(domain.toolkit, SandboxToolkit) and isinstance(domain.toolkit, Toolkit)
        assert domain.initial.state_hash() == reference.initial.state_hash()
        assert domain.toolkit.schemas() == reference.toolkit.schemas()
        for name, spec in reference.toolkit.specs.items():
            mine = domain.toolkit.specs[name].params.model_fields
            theirs = spec.params.model_fields
            assert {k: (f.annotation, f.metadata, f.default) for k, f in mine.items()} == {
                k: (f.annotation, f.metadata, f.default) for k, f in theirs.items()
            }
        for table, spec in reference.tables.items():
            host = domain.tables[table]
            assert host.model is not None and spec.model is not None
            assert (host.key_field, host.model.__name__) == (spec.key_field, spec.model.__name__)
            assert host.model.model_json_schema() == spec.model.model_json_schema()
        for task in reference.tasks[::10]:  # three tasks per domain keep the test short
            sandboxed, in_process = replay_gold(domain, task), replay_gold(reference, task)
            assert sandboxed.ok, sandboxed.failures
            assert sandboxed.session.state_hash() == in_process.session.state_hash()
            assert [o.content for o in sandboxed.outcomes] == [
                o.content for o in in_process.outcomes
            ]
        first = reference.toolkit.names[0]
        bad = replay_calls(domain, None, [(first, {"no_such_argument": 5}), ("nope", {})])
        in_process = replay_calls(reference, None, [(first, {"no_such_argument": 5}), ("nope", {})])
        assert [(o.status, o.content) for o in bad.outcomes] == [
            (o.status, o.content) for o in in_process.outcomes
        ]


def test_the_tool_graph_and_the_tau2_export_see_the_same_domain(tmp_path: Path) -> None:
    reference = load_domain(library_path("hotel"), check_gold=False)
    with load_sandboxed_domain(library_path("hotel"), check_gold=False) as domain:
        assert build_tool_graph(domain) == build_tool_graph(reference)
        export_tau2(domain, tmp_path / "sandboxed")
        export_tau2(reference, tmp_path / "in_process")
    mine = {p.relative_to(tmp_path / "sandboxed"): p for p in (tmp_path / "sandboxed").rglob("*")}
    theirs = {
        p.relative_to(tmp_path / "in_process"): p for p in (tmp_path / "in_process").rglob("*")
    }
    assert mine.keys() == theirs.keys()
    for rel, path in mine.items():
        if path.is_file():
            assert path.read_bytes() == theirs[rel].read_bytes(), rel


def test_the_sdks_marks_reach_the_host_models(tmp_path: Path) -> None:
    # Ref and TextFormat (IsoDate) are annotation metadata a JSON schema does not carry: the
    # child writes them in, the host's models carry them again, and the tool graph sees them.
    tools = TOY_TOOLS.replace(
        "from maestro.domains.sdk import", "from maestro.domains.sdk import IsoDate, Ref,"
    ) + (
        "\n\nfrom typing import Annotated\n\n\n"
        '@tool("read")\ndef orders_on(\n    db: Database,\n    day: IsoDate,\n'
        '    customer_id: Annotated[str, Ref("customers")],\n) -> list:\n'
        '    """Orders of a customer on a day.\n\n    Args:\n        day: The day.\n'
        '        customer_id: The customer.\n    """\n'
        '    return db.find("orders", customer_id=customer_id)\n'
    )
    root = make_package(tmp_path, "toy", tools)
    in_process = load_domain(root, check_gold=False, trusted=True)
    with load_sandboxed_domain(root, check_gold=False) as domain:
        assert build_tool_graph(domain) == build_tool_graph(in_process)
        mine = domain.toolkit.specs["orders_on"].params.model_fields
        assert TextFormat("date") in mine["day"].metadata
        assert Ref("customers") in mine["customer_id"].metadata
        assert domain.toolkit.schemas() == in_process.toolkit.schemas()
        bad = domain.toolkit.call(
            domain.start_session(), "orders_on", {"day": "15/03", "customer_id": "C1"}
        )
        assert bad.status == "invalid_call" and "pattern" in bad.content


def test_session_writes_flow_both_ways(sandboxed: Domain, toy: Domain) -> None:
    toolkit = sandboxed.toolkit
    session = sandboxed.start_session()
    # A host-side write (a task's initialization data does this) reaches the child.
    session.update("orders", "O1", status="shipped")
    out = toolkit.call(session, "cancel_order", {"order_id": "O1"})
    assert out.status == "tool_error" and "shipped" in out.content
    session.update("orders", "O1", status="pending")
    assert toolkit.call(session, "cancel_order", {"order_id": "O1"}).ok
    # A fork carries the sandbox's writes; each branch then goes its own way.
    branch = session.fork()
    assert toolkit.call(branch, "place_order", {"customer_id": "C1", "skus": ["P1"]}).ok
    assert branch.state_hash() != session.state_hash()
    # A host-side rollback undoes a sandboxed write, and the child follows.
    before = session.state_hash()
    with pytest.raises(KeyError), session.transaction():
        assert toolkit.call(session, "place_order", {"customer_id": "C1", "skus": ["P1"]}).ok
        raise KeyError("abandon")
    assert session.state_hash() == before
    again = toolkit.call(session, "place_order", {"customer_id": "C1", "skus": ["P1"]})
    assert again.ok
    # The same calls in process give the same state.
    reference = toy.start_session()
    for name, args in [
        ("cancel_order", {"order_id": "O1"}),
        ("place_order", {"customer_id": "C1", "skus": ["P1"]}),
    ]:
        assert toy.toolkit.call(reference, name, args).ok
    assert reference.state_hash() == session.state_hash()


def test_a_closed_session_refuses_writes_as_in_process(sandboxed: Domain, toy: Domain) -> None:
    mine, theirs = sandboxed.start_session(), toy.start_session()
    mine.closed = theirs.closed = True
    a = sandboxed.toolkit.call(mine, "cancel_order", {"order_id": "O1"})
    b = toy.toolkit.call(theirs, "cancel_order", {"order_id": "O1"})
    assert (a.status, a.content) == (b.status, b.content)


def test_a_record_added_and_deleted_in_one_call_leaves_what_it_does_in_process(
    sandboxed: Domain,
) -> None:
    session = sandboxed.start_session()
    for _ in range(2):  # the second call finds the mirror in step with the host
        out = sandboxed.toolkit.call(session, "add_and_remove", {"sku": "P9"})
        assert out.ok, out.content
    expected = sandboxed.start_session()
    expected.insert("products", {"sku": "P9", "title": "t", "price": 1.0, "stock": 1})
    expected.delete("products", "P9")
    assert session.touched() == expected.touched() == {("products", "P9")}
    assert session.state_hash() == expected.state_hash() == sandboxed.initial.state_hash()


def test_everyday_standard_library_work_and_the_clock_run_in_the_sandbox(
    sandboxed: Domain,
) -> None:
    session = sandboxed.start_session()
    out = sandboxed.toolkit.call(session, "everyday_stdlib", {"day": "2026-03-15"})
    assert out.ok, out.content
    assert out.content == '["Sunday", "12.34", 2, "20260315"]'
    clock = sandboxed.toolkit.call(session, "today", {})
    assert clock.content == "2026-03-15 2026-03-15T10:00:00", clock.content


def test_future_annotations_and_aliases_resolve_in_the_child(tmp_path: Path) -> None:
    tools = (
        "from __future__ import annotations\nfrom typing import Literal\n"
        + TOY_TOOLS
        + '\n\nStatus = Literal["pending", "shipped"]\n\n'
        + '@tool("read")\ndef by_status(db: Database, status: Status) -> list:\n'
        + '    """Orders with a status.\n\n    Args:\n        status: The status.\n    """\n'
        + '    return db.find("orders", status=status)\n'
    )
    root = make_package(tmp_path, "toy", tools)
    with load_sandboxed_domain(root, check_gold=False) as domain:
        schema = next(s for s in domain.toolkit.schemas() if s["function"]["name"] == "by_status")
        assert schema["function"]["parameters"]["properties"]["status"]["enum"] == [
            "pending",
            "shipped",
        ]
        out = domain.toolkit.call(domain.start_session(), "by_status", {"status": "pending"})
        assert out.ok and "O1" in out.content
        bad = domain.toolkit.call(domain.start_session(), "by_status", {"status": "lost"})
        assert bad.status == "invalid_call", "the host validates with its own model"


def test_a_parameter_type_defined_in_tools_py_works(tmp_path: Path) -> None:
    # The child computes the schema from the real function: the host needs no type of its own.
    tools = TOY_TOOLS + (
        "\n\nfrom dataclasses import dataclass\n\n\n@dataclass\nclass Window:\n"
        "    start: str\n    days: int = 7\n\n\n"
        '@tool("read")\ndef in_window(db: Database, window: Window) -> str:\n'
        '    """Orders in a window.\n\n    Args:\n        window: The window.\n    """\n'
        '    return f"{window.start}+{window.days}"\n'
    )
    root = make_package(tmp_path, "toy", tools)
    with load_sandboxed_domain(root, check_gold=False) as domain:
        out = domain.toolkit.call(domain.start_session(), "in_window", {"window": {"start": "x"}})
        assert (out.status, out.content) == ("ok", "x+7")
        bad = domain.toolkit.call(domain.start_session(), "in_window", {"window": {"days": 1}})
        assert bad.status == "invalid_call" and "start" in bad.content


def test_a_record_type_the_host_cannot_check_is_a_load_problem(tmp_path: Path) -> None:
    models = TOY_MODELS.replace(
        "    stock: int\n", "    stock: int\n    shelf: tuple[int, int] = (0, 0)\n"
    )
    root = make_package(tmp_path, "toy", TOY_TOOLS, models)
    with pytest.raises(DomainLoadError) as err, load_sandboxed_domain(root, check_gold=False):
        pass
    assert "models.py:Product: record schema not supported: properties.shelf" in str(err.value)
    assert "'prefixItems' is not supported" in str(err.value)


def test_invalid_records_are_reported_as_the_loader_reports_them(tmp_path: Path) -> None:
    root = make_package(tmp_path, "toy", TOY_TOOLS)
    db = (root / "db.json").read_text().replace('"status": "shipped"', '"status": "lost"', 1)
    (root / "db.json").write_text(db.replace('"customer_id": "C1"', '"customer_id": "C404"', 1))
    with pytest.raises(DomainLoadError) as sandboxed, load_sandboxed_domain(root, check_gold=False):
        pass
    with pytest.raises(DomainLoadError) as in_process:
        load_domain(root, check_gold=False, trusted=True)
    assert sorted(map(str, sandboxed.value.problems)) == sorted(map(str, in_process.value.problems))


def test_vetted_modules_are_the_hosts_choice(tmp_path: Path) -> None:
    tools = "from string import ascii_lowercase\n" + TOY_TOOLS
    tools += tool_source("letters", "return ascii_lowercase")
    root = make_package(tmp_path, "toy", tools)
    with pytest.raises(DomainLoadError, match="import from 'string' is not allowed"):
        load_sandboxed_domain(root, check_gold=False).__enter__()
    with pytest.raises(DomainLoadError, match=r"only \['digits'\] may be imported from string"):
        load_sandboxed_domain(root, check_gold=False, vetted={"string": ["digits"]}).__enter__()
    vetted = {"string": ["ascii_lowercase"]}
    with load_sandboxed_domain(root, check_gold=False, vetted=vetted) as domain:
        out = domain.toolkit.call(domain.start_session(), "letters", {})
        assert out.content == "abcdefghijklmnopqrstuvwxyz"


def test_a_tool_inside_a_block_is_a_tool(tmp_path: Path) -> None:
    # What the child loaded is what the host serves: there is no second reading to disagree.
    hidden = "\n\nif True:\n" + tool_source("hidden", 'return "found"').replace("\n", "\n    ")
    root = make_package(tmp_path, "toy", TOY_TOOLS + hidden)
    with unchecked(root) as domain:
        assert domain.toolkit.call(domain.start_session(), "hidden", {}).content == "found"


def test_import_errors_are_load_problems_at_their_line(tmp_path: Path) -> None:
    root = make_package(tmp_path, "toy", TOY_TOOLS + '\nraise ValueError("half-written")\n')
    line = (TOY_TOOLS + "\n").count("\n") + 1
    with pytest.raises(DomainLoadError) as err, load_sandboxed_domain(root, LIMITS):
        pass
    assert f"tools.py:line {line}: import failed: ValueError: half-written" in str(err.value)


def test_import_time_attacks_fail_the_load_in_both_layers(tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    tools = f'import os\nos.system("touch {target}")\n' + TOY_TOOLS
    root = make_package(tmp_path, "toy", tools)
    with pytest.raises(DomainLoadError) as static:
        load_sandboxed_domain(root, LIMITS, check_gold=False).__enter__()
    assert "tools.py:line 1 col 1: [import] import of 'os' is not allowed" in str(static.value)
    with pytest.raises(DomainLoadError) as runtime, unchecked(root):
        pass
    assert "the sandbox refused os.system" in str(runtime.value)
    assert not target.exists()


def test_a_crashed_child_is_restarted_and_the_session_survives(tmp_path: Path) -> None:
    crash = tool_source("crash", "import os\nos._exit(3)")
    root = make_package(tmp_path, "toy", TOY_TOOLS + crash)
    with unchecked(root) as domain:
        toolkit = domain.toolkit
        assert isinstance(toolkit, SandboxToolkit)
        session = domain.start_session()
        assert toolkit.call(session, "cancel_order", {"order_id": "O1"}).ok
        first_pid = toolkit.child_pid
        out = toolkit.call(session, "crash", {})
        assert out.status == "crash" and "exited with status 3" in out.content
        order = toolkit.call(session, "get_order", {"order_id": "O1"})
        assert '"status": "cancelled"' in order.content, "the new child sees the earlier write"
        assert toolkit.child_pid not in (None, first_pid) and toolkit.restarts == 1
        pid = toolkit.child_pid
    assert pid is not None and stopped(pid), "close stops the child"


def test_a_killed_child_has_its_successor_started_in_the_background(tmp_path: Path) -> None:
    root = make_package(tmp_path, "toy", TOY_TOOLS + tool_source("refused", "open('/x')"))
    with unchecked(root) as domain:
        toolkit = domain.toolkit
        assert isinstance(toolkit, SandboxToolkit)
        session = domain.start_session()
        assert toolkit.call(session, "refused", {}).status == "sandbox"
        spare = toolkit._spare
        assert spare is not None, "the successor starts right after the kill"
        spare.thread.join(60)
        assert spare.error is None and spare.process.alive
        started = time.monotonic()
        assert toolkit.call(session, "get_order", {"order_id": "O1"}).ok
        assert time.monotonic() - started < 1.0, "the call did not wait for a start"
        assert toolkit.child_pid == spare.process.worker_pid


def test_a_closed_toolkit_answers_and_does_not_restart(tmp_path: Path) -> None:
    root = make_package(tmp_path, "toy", TOY_TOOLS)
    with load_sandboxed_domain(root, LIMITS, check_gold=False) as domain:
        toolkit = domain.toolkit
        assert isinstance(toolkit, SandboxToolkit)
    out = toolkit.call(domain.start_session(), "get_order", {"order_id": "O1"})
    assert out.status == "sandbox" and "closed" in out.content
    assert toolkit.child_pid is None


def test_a_call_past_its_cpu_limit_is_stopped(tmp_path: Path) -> None:
    burn = tool_source("burn", 'import re\nreturn str(re.match("(a+)+$", "a" * 64 + "b"))')
    root = make_package(tmp_path, "toy", TOY_TOOLS + burn)
    with unchecked(root, SandboxLimits(cpu_s=1, call_timeout_s=30)) as domain:
        started = time.monotonic()
        out = domain.toolkit.call(domain.start_session(), "burn", {})
        assert out.status == "sandbox" and "more than its 1 s of CPU" in out.content, out.content
        assert time.monotonic() - started < 10
        assert domain.toolkit.call(domain.start_session(), "get_order", {"order_id": "O1"}).ok


# ----- the static check: a linter whose messages an LLM can act on ------------------------------


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        ("from os import *", "import *"),
        ("from .models import Order\nfrom ..secrets import key", "relative import"),
        ("import json\nx = json.loads.__globals__", "'__globals__'"),
        ("def f(x):\n    return type('X', (), {})", "type() with three arguments"),
        ("class C(metaclass=type):\n    pass", "class keyword 'metaclass'"),
        ("async def f():\n    pass", "async def"),
        ("import typing\nt = typing.get_type_hints", "'get_type_hints'"),
        ("x = 'a {0[k]}'.format({'k': 1})", "format fields may not access"),
        ("def f(s):\n    return s.format(1)", ".format() is allowed only on a string literal"),
        ("x = (", "syntax error"),
        ("x = 1\n" * 100_000, "the limit is"),
        # A module an allowed one imports is not allowed through it (fourth red team, case 06).
        ("import typing\nm = typing.sys.modules", "typing.sys is the module sys"),
        ("from typing import sys", "typing.sys is the module sys"),
        ("import re as r\nm = r.enum.sys", "enum.sys is the module sys"),
        ("import json\nc = json.codecs", "json.codecs is the module codecs"),
    ],
)
def test_static_check_rules(source: str, rule: str) -> None:
    problems = check_tools_source(source, filename="gen/tools.py")
    assert any(rule in p.message for p in problems), [str(p) for p in problems]
    assert all(p.file == "gen/tools.py" for p in problems)


def test_submodules_of_allowed_modules_stay_allowed() -> None:
    source = "import json\nfrom collections import abc\nE = json.decoder.JSONDecodeError\nM = abc.Mapping"
    assert check_tools_source(source) == []


def test_library_and_fixture_sources_pass_the_static_check() -> None:
    folders = [library_path(d) for d in ("vetclinic", "energy", "hotel")] + [FIXTURES / "toy"]
    for folder in folders:
        assert check_tools_source((folder / "tools.py").read_text()) == [], folder
        assert check_models_source((folder / "models.py").read_text()) == [], folder


@pytest.mark.parametrize(
    ("line", "rule"),
    [
        ("    def clean(self) -> str:\n        return 'x'", "fields only, not FunctionDef"),
        ("    name: str = make_default()", "may be called in a declaration"),
        ("    name: 'exec(\"1\")' = ''", "string annotation"),
        ("    name: str = 'a' * 10", "BinOp is not allowed"),
        ("    name: Annotated[str, Ref(lookup())]", "may be called"),
        ("    name: str = Field(json_schema_extra=print)", "Field(json_schema_extra=...)"),
        ("    model_config = ConfigDict(regex_engine='python-re')", "ConfigDict(regex_engine"),
        ("    model_config = {'regex_engine': 'python-re'}", "model_config keys must be"),
        ("    model_config = make_config", "model_config must be ConfigDict"),
    ],
)
def test_models_may_only_declare(line: str, rule: str) -> None:
    source = (
        "from typing import Annotated\nfrom pydantic import ConfigDict, Field\n"
        "from maestro.domains.sdk import Record, Ref\n\n"
        f"class Customer(Record):\n    customer_id: str\n{line}\n"
    )
    problems = check_models_source(source)
    assert any(rule in p.message for p in problems), [str(p) for p in problems]


def test_models_statements_outside_classes_are_refused() -> None:
    problems = check_models_source("import json\nprint('hi')\nfor i in []:\n    pass\n")
    assert [p.location for p in problems] == ["line 2 col 1", "line 3 col 1"]
