from __future__ import annotations

import json
from pathlib import Path

import pytest

from maestro.domains import DomainLoadError, inspect_package, load_domain, replay_gold


def _edit_json(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _tasks(path: Path) -> list[dict]:
    return [
        json.loads(line) for line in (path / "tasks.jsonl").read_text().splitlines() if line.strip()
    ]


def _write_tasks(path: Path, lines: list[str]) -> None:
    (path / "tasks.jsonl").write_text("\n".join(lines) + "\n")


def test_the_toy_package_loads(toy_copy: Path) -> None:
    domain = load_domain(toy_copy, trusted=True)
    assert domain.id == "toy"
    assert [t.id for t in domain.tasks] == ["toy_cancel", "toy_status", "toy_refuse"]
    assert domain.initial.count() == 6


def test_every_problem_is_reported_with_file_and_location(toy_copy: Path) -> None:
    def break_db(db: dict) -> None:
        db["orders"]["O1"]["customer_id"] = "C404"  # dangling reference
        db["orders"]["O2"]["status"] = "lost"  # not an allowed value
        db["products"]["P9"] = {"sku": "P1", "title": "Key mismatch", "price": 1.0, "stock": 1}
        db["wishlists"] = {}

    _edit_json(toy_copy / "db.json", break_db)
    good = _tasks(toy_copy)
    unknown_tool = dict(good[0], id="bad_tool")
    unknown_tool["evaluation_criteria"] = {
        "actions": [{"action_id": "a1", "name": "refund_order", "arguments": {"order_id": "O1"}}],
        "reward_basis": ["DB", "ACTION"],
    }
    empty_basis = dict(good[1], id="bad_basis")
    empty_basis["evaluation_criteria"] = dict(good[1]["evaluation_criteria"], communicate_info=[])
    bad_args = dict(good[0], id="bad_args")
    bad_args["evaluation_criteria"] = {
        "actions": [{"action_id": "a1", "name": "cancel_order", "arguments": {"order_id": 7}}],
        "reward_basis": ["DB", "ACTION"],
    }
    failing_gold = dict(good[0], id="bad_gold")
    failing_gold["evaluation_criteria"] = {
        "actions": [
            {
                "action_id": "a1",
                "name": "place_order",
                "arguments": {"customer_id": "C1", "skus": ["P2"]},
            }
        ],
        "reward_basis": ["DB", "ACTION"],
    }
    _write_tasks(
        toy_copy,
        [
            json.dumps(good[0]),
            "{not json",
            json.dumps(unknown_tool),
            json.dumps(empty_basis),
            json.dumps(bad_args),
            json.dumps(good[0]),  # duplicate id
            json.dumps(failing_gold),
            json.dumps({"id": "no_scenario", "evaluation_criteria": {"reward_basis": []}}),
        ],
    )
    with pytest.raises(DomainLoadError) as info:
        load_domain(toy_copy, trusted=True)
    found = {(p.file, p.location): p.message for p in info.value.problems}
    assert "refers to missing customers 'C404'" in found[("db.json", "orders/O1.customer_id")]
    assert (
        "Input should be 'pending', 'shipped' or 'cancelled'"
        in found[("db.json", "orders/O2.status")]
    )
    assert "not the key" in found[("db.json", "products/P9")]
    assert "unknown table" in found[("db.json", "wishlists")]
    assert "invalid JSON" in found[("tasks.jsonl", "line 2")]
    assert "unknown tool 'refund_order'" in found[("tasks.jsonl", "line 3 (task bad_tool)")]
    assert "COMMUNICATE" in found[("tasks.jsonl", "line 4 (task bad_basis)")]
    assert "argument 'order_id'" in found[("tasks.jsonl", "line 5 (task bad_args)")]
    assert (
        "duplicate task id (first on line 1)" in found[("tasks.jsonl", "line 6 (task toy_cancel)")]
    )
    assert (
        "gold action a1 (place_order) failed: Error: product P2 is out of stock"
        in found[("tasks.jsonl", "line 7 (task bad_gold)")]
    )
    assert ("tasks.jsonl", "line 8 (task no_scenario).user_scenario") in found
    assert ("tasks.jsonl", "line 8 (task no_scenario).evaluation_criteria.reward_basis") in found
    assert len(info.value.problems) >= 12
    assert "problem(s)" in str(info.value)


def test_python_errors_name_the_file_and_line(toy_copy: Path) -> None:
    (toy_copy / "models.py").write_text(
        "from maestro.domains.sdk import Record\n\nclass Broken(Record)\n    x: int\n"
    )
    tools = (toy_copy / "tools.py").read_text()
    (toy_copy / "tools.py").write_text(tools + "\n\nraise RuntimeError('boom at import')\n")
    (toy_copy / "policy.md").write_text("   \n")
    domain, problems = inspect_package(toy_copy, trusted=True)
    assert domain is None
    messages = [str(p) for p in problems]
    assert any(m.startswith("models.py:line 3: syntax error") for m in messages), messages
    assert any("tools.py:line" in m and "RuntimeError: boom at import" in m for m in messages), (
        messages
    )
    assert "policy.md: is empty" in messages


def test_missing_files_and_bad_manifest(tmp_path: Path) -> None:
    (tmp_path / "domain.json").write_text(json.dumps({"id": "Bad Id", "name": "x", "version": "1"}))
    domain, problems = inspect_package(tmp_path, trusted=True)
    assert domain is None
    messages = [str(p) for p in problems]
    for name in ("models.py", "db.json", "tools.py", "policy.md", "tasks.jsonl"):
        assert f"{name}: missing" in messages
    assert any(m.startswith("domain.json:id:") for m in messages)
    assert any(m.startswith("domain.json:description:") for m in messages)
    assert inspect_package(tmp_path / "nowhere")[1][0].message == "not a folder"


def test_task_initial_state_patches_the_session_not_the_domain(toy_copy: Path) -> None:
    tasks = _tasks(toy_copy)
    patched = dict(tasks[0], id="patched")
    patched["initial_state"] = {
        "initialization_data": {"orders": {"O2": {"status": "pending"}}},
        "initialization_actions": [
            {"action_id": "i1", "name": "cancel_order", "arguments": {"order_id": "O1"}}
        ],
    }
    patched["evaluation_criteria"] = {
        "actions": [{"action_id": "a1", "name": "cancel_order", "arguments": {"order_id": "O2"}}],
        "reward_basis": ["DB", "ACTION"],
    }
    _write_tasks(toy_copy, [json.dumps(patched)])
    domain = load_domain(toy_copy, trusted=True)
    task = domain.task("patched")
    result = replay_gold(domain, task)
    assert result.ok
    assert result.session.get("orders", "O1")["status"] == "cancelled"
    assert result.session.get("orders", "O2")["status"] == "cancelled"
    assert domain.initial.raw("orders", "O2")["status"] == "shipped"


def test_failing_initialization_is_reported(toy_copy: Path) -> None:
    tasks = _tasks(toy_copy)
    bad = dict(tasks[0], id="bad_init")
    bad["initial_state"] = {
        "initialization_actions": [
            {"action_id": "i1", "name": "cancel_order", "arguments": {"order_id": "O2"}}
        ]
    }
    _write_tasks(toy_copy, [json.dumps(bad)])
    _, problems = inspect_package(toy_copy, trusted=True)
    assert any("initialization action i1" in p.message and "shipped" in p.message for p in problems)


def test_references_inside_nested_parts_and_lists_are_checked(toy_copy: Path) -> None:
    models = (toy_copy / "models.py").read_text()
    models = models.replace(
        "class Order(Record):",
        'class Line(BaseModel):\n    sku: Annotated[str, Ref("products")]\n    gift_for: Annotated[str, Ref("customers")] | None = None\n\n\nclass Order(Record):',
    )
    models = models.replace(
        '    items: list[Annotated[str, Ref("products")]]\n',
        '    items: list[Annotated[str, Ref("products")]]\n    lines: list[Line] = []\n',
    )
    models = "from pydantic import BaseModel\n" + models
    (toy_copy / "models.py").write_text(models)

    def add_lines(db: dict) -> None:
        db["orders"]["O1"]["lines"] = [{"sku": "P1"}, {"sku": "P7", "gift_for": "C9"}]
        db["orders"]["O2"]["items"] = ["P2", "P404"]

    _edit_json(toy_copy / "db.json", add_lines)
    _, problems = inspect_package(toy_copy, trusted=True)
    found = {(p.file, p.location): p.message for p in problems}
    assert found[("db.json", "orders/O1.lines[1].sku")] == "refers to missing products 'P7'"
    assert found[("db.json", "orders/O1.lines[1].gift_for")] == "refers to missing customers 'C9'"
    assert found[("db.json", "orders/O2.items[1]")] == "refers to missing products 'P404'"
    assert ("db.json", "orders/O1.lines[0].sku") not in found


def test_a_package_outside_the_library_loads_through_the_sandbox_whatever_it_claims(
    toy_copy: Path,
) -> None:
    import os

    from maestro.domains.sandbox import SandboxToolkit

    manifest = json.loads((toy_copy / "domain.json").read_text())
    assert manifest["provenance"]["source"] == "hand-built"  # the package's own claim
    domain = load_domain(toy_copy)
    try:
        assert isinstance(domain.toolkit, SandboxToolkit)
        assert domain.toolkit.child_pid not in (None, os.getpid())
        for task in domain.tasks:  # the tools run in the child, the same as in process
            assert replay_gold(domain, task).ok, task.id
    finally:
        domain.close()
    assert domain.toolkit.child_pid is None


def test_hostile_tools_are_never_imported_unless_the_calling_code_trusts_them(
    toy_copy: Path,
) -> None:
    marker = toy_copy / "imported.txt"
    tools = (toy_copy / "tools.py").read_text()
    (toy_copy / "tools.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n" + tools)
    domain, problems = inspect_package(toy_copy)
    assert domain is None
    assert any(p.file == "tools.py" and "open" in p.message for p in problems), problems
    assert not marker.exists()
    # Code that vouches for a package (a test fixture) imports it in process: the marker says so.
    inspect_package(toy_copy, trusted=True)
    assert marker.exists()


def test_the_library_loads_in_process() -> None:
    from maestro.domains import library_path
    from maestro.domains.loader import is_library_package
    from maestro.domains.sandbox import SandboxToolkit

    domain = load_domain(library_path("hotel"), check_gold=False)
    assert not isinstance(domain.toolkit, SandboxToolkit)
    assert is_library_package(library_path("hotel") / ".." / "hotel")
    assert not is_library_package(Path(__file__).parent)


def _mark_synthesized(package: Path) -> None:
    manifest = json.loads((package / "domain.json").read_text())
    manifest["provenance"] = {"source": "synthesized", "authors": ["maestro codegen"]}
    (package / "domain.json").write_text(json.dumps(manifest))


# ----- package files as hostile input (maestro/domains/files.py) -------------------------------


def _problems_within(package: Path, timeout_s: float = 30.0) -> list[str]:
    """inspect_package's problems as text; fails (instead of hanging) if it does not return."""
    import threading

    out: list[list[str]] = []
    worker = threading.Thread(
        target=lambda: out.append([str(p) for p in inspect_package(package)[1]]), daemon=True
    )
    worker.start()
    worker.join(timeout_s)
    assert out, f"inspect_package({package}) still running after {timeout_s} s"
    return out[0]


def test_a_symlinked_package_file_is_refused_before_it_is_read(
    toy_copy: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("s3cr3t host file\n")
    (toy_copy / "policy.md").unlink()
    (toy_copy / "policy.md").symlink_to(secret)
    messages = _problems_within(toy_copy)
    assert messages == [
        f"policy.md: is a symbolic link (to {secret}); package files must be regular files "
        "inside the package"
    ]
    assert not any("s3cr3t" in m for m in messages)


def test_symlinks_anywhere_in_the_package_are_refused_even_inside_it(toy_copy: Path) -> None:
    (toy_copy / "extra").mkdir()
    (toy_copy / "extra" / "passwd").symlink_to("/etc/passwd")
    (toy_copy / "tasks2.jsonl").symlink_to(toy_copy / "tasks.jsonl")
    messages = _problems_within(toy_copy)
    assert len(messages) == 2
    assert messages[0].startswith("extra/passwd: is a symbolic link (to /etc/passwd)")
    assert messages[1].startswith("tasks2.jsonl: is a symbolic link")


def test_a_synthesized_package_with_a_symlink_is_refused_before_the_sandbox(
    toy_copy: Path,
) -> None:
    _mark_synthesized(toy_copy)
    (toy_copy / "db.json").rename(toy_copy / "real_db.json")
    (toy_copy / "db.json").symlink_to("real_db.json")
    assert _problems_within(toy_copy) == [
        "db.json: is a symbolic link (to real_db.json); package files must be regular files "
        "inside the package"
    ]


def test_a_fifo_or_device_as_a_package_file_is_refused_without_blocking(toy_copy: Path) -> None:
    import os
    import stat

    (toy_copy / "policy.md").unlink()
    os.mkfifo(toy_copy / "policy.md")  # opening it for reading would block forever
    assert _problems_within(toy_copy) == ["policy.md: is a FIFO, not a regular file"]
    (toy_copy / "policy.md").unlink()
    try:
        os.mknod(toy_copy / "policy.md", stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero
    except PermissionError:
        pytest.skip("creating a device node needs root")
    assert _problems_within(toy_copy) == ["policy.md: is a device, not a regular file"]


def test_a_duplicate_key_is_a_problem_with_both_places(toy_copy: Path) -> None:
    db = (toy_copy / "db.json").read_text()
    # The second C1 would silently replace the first.
    db = db.replace('"C2": {"customer_id": "C2"', '"C1": {"customer_id": "C2"', 1)
    (toy_copy / "db.json").write_text(db)
    manifest = (toy_copy / "domain.json").read_text()
    (toy_copy / "domain.json").write_text(
        manifest.replace('{"id": "toy",', '{"id": "toy", "id": "x",')
    )
    messages = _problems_within(toy_copy)
    assert "db.json:line 3 column 17: duplicate key 'C1' (first at line 2 column 17)" in messages
    assert "domain.json:line 1 column 15: duplicate key 'id' (first at line 1 column 2)" in messages


def test_a_duplicate_key_in_a_task_line_is_a_problem_of_that_line(toy_copy: Path) -> None:
    lines = (toy_copy / "tasks.jsonl").read_text().splitlines()
    lines[1] = lines[1].replace('{"id": "toy_status",', '{"id": "toy_status", "id": "toy_other",')
    _write_tasks(toy_copy, lines)
    assert _problems_within(toy_copy) == [
        "tasks.jsonl:line 2: duplicate key 'id' (first at line 1 column 2) at column 22"
    ]


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        (
            "huge int",
            b'{"orders": {"O1": {"total": ' + b"9" * 5000 + b"}}}",
            "db.json:line 1 column 29: an integer of 5,000 digits; at most 20",
        ),
        (
            "deep nesting",
            b'{"x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
            "db.json: invalid JSON: nested deeper than 64 levels",
        ),
        (
            "moderate nesting",
            b'{"x": ' + b"[" * 100 + b"]" * 100 + b"}",
            "db.json:" + ("x" + "[0]" * 65)[:57] + "...: nested deeper than 64 levels",
        ),
        (
            "lone surrogate",
            b'{"customers": {"C1": {"name": "\\ud800"}}}',
            "db.json:customers.C1.name: a lone surrogate in '\\ud800': not encodable text",
        ),
        (
            "not UTF-8",
            b'{"customers": {}}\n\xff\xfe',
            "db.json:line 2: not UTF-8 text (byte 18 of the file)",
        ),
        ("NaN", b'{"orders": {"O1": {"total": NaN}}}', "db.json:line 1 column 29: NaN is not JSON"),
        (
            "float overflow",
            b'{"orders": {"O1": {"total": 1e999}}}',
            "db.json:line 1 column 29: 1e999 is too large for a float",
        ),
        ("too large", b" " * (64 * 1024 * 1024 + 1), "db.json: is larger than 67,108,864 bytes"),
    ],
)
def test_hostile_json_is_a_load_problem_never_a_traceback(
    toy_copy: Path, name: str, content: bytes, expected: str
) -> None:
    (toy_copy / "db.json").write_bytes(content)
    domain, problems = inspect_package(toy_copy)
    assert domain is None
    assert expected in [str(p) for p in problems], [str(p) for p in problems]


def test_hostile_task_lines_are_problems_of_their_line(toy_copy: Path) -> None:
    lines = (toy_copy / "tasks.jsonl").read_bytes().splitlines()
    lines.insert(1, b'{"id": "x", "n": ' + b"1" * 5000 + b"}")
    lines.insert(2, b'{"id": "\xc3\x28"}')
    lines.insert(3, b'{"id": "\\udfff"}')
    (toy_copy / "tasks.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    _, problems = inspect_package(toy_copy)
    messages = [str(p) for p in problems]
    assert messages == [
        "tasks.jsonl:line 2: an integer of 5,000 digits; at most 20 at column 18",
        "tasks.jsonl:line 3: not UTF-8 text (byte 8 of the line)",
        "tasks.jsonl:line 4 id: a lone surrogate in '\\udfff': not encodable text",
    ]


@pytest.mark.parametrize("version", ["١.٠.٠", "１.0.0", "1.0.0\n", "1.0", "1234567890.0.0"])
def test_a_version_is_ascii_digits_only(toy_copy: Path, version: str) -> None:
    """Unicode digits passed ``\\d`` (the pattern engine's digit class is Unicode's)."""
    manifest = json.loads((toy_copy / "domain.json").read_text())
    manifest["version"] = version
    (toy_copy / "domain.json").write_text(json.dumps(manifest))
    domain, problems = inspect_package(toy_copy, trusted=True)
    assert domain is None
    assert any(p.file == "domain.json" and "version" in str(p) for p in problems), problems
