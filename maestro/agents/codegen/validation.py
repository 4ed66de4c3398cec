"""Whether a blueprint's operations fit its tables: every path resolves, every test suits its
value's type, every effect writes a value of the right type, a create sets every field it must,
every parameter is used. Each problem is a sentence the blueprint stage's next attempt reads."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from maestro.agents.codegen.blueprint import (
    IDENT,
    RESERVED,
    Adjust,
    Computed,
    Condition,
    FieldType,
    Operation,
    Restore,
    SetValue,
    check_ident,
)
from maestro.agents.codegen.conditions import (
    HOUR_TESTS,
    NULL_TESTS,
    NUMERIC_TESTS,
    ParamRef,
    Subject,
    condition_node,
    expression_problem,
    op_scope,
    own_root,
    params_of,
    record_params,
    resolve,
    shapes,
    vtype,
)
from maestro.agents.codegen.known import desk_key_problems
from maestro.domains.expressions import (
    Compare,
    ExpressionError,
    ListLit,
    Lit,
    Member,
    Path,
    Scope,
    VType,
    infer,
    parse,
    resolve_path,
    walk,
)
from maestro.domains.laws import compile_law

if TYPE_CHECKING:
    from maestro.agents.codegen.blueprint import BlueprintDraft


def blueprint_problems(bp: BlueprintDraft) -> list[str]:
    """Every way the blueprint's names, types, checks and effects do not fit together."""
    problems: list[str] = []
    tables = {e.table: e for e in bp.entities}
    for label, names in (
        ("entity", [e.name for e in bp.entities]),
        ("table", [e.table for e in bp.entities]),
        ("key", [e.key for e in bp.entities]),
        ("key prefix", [e.prefix for e in bp.entities]),
        ("operation", [o.name for o in bp.operations]),
    ):
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            problems.append(f"{label} names repeat: {dup}")
    for e in bp.entities:
        for fname, ftype in e.field_types().items():
            if ftype.ref is not None and ftype.ref not in tables:
                problems.append(f"{e.name}.{fname} refers to unknown table {ftype.ref!r}")
    if problems:
        return problems  # the operations' checks need sound tables
    for op in bp.operations:
        problems.extend(operation_problems(bp, op))
    kinds = [op.kind for op in bp.operations]
    problems.extend(desk_key_problems(bp))
    if "lookup" not in kinds:
        problems.append(
            "no lookup operation: a customer is found by natural identifiers (an email, a name "
            'and date of birth): add one such as {"kind": "lookup", "by": ["email"]}'
        )
    if not {"update", "create"} & set(kinds):
        problems.append("no operation changes anything: add update or create operations")
    ops = {op.name: op for op in bp.operations}
    for op in bp.operations:
        for name in op.then:
            nxt = ops.get(name)
            if op.tool_kind != "write":
                problems.append(f"operation {op.name}: a {op.kind} has no then (writes only)")
                break
            if nxt is None or nxt.tool_kind != "write" or nxt is op:
                problems.append(
                    f"operation {op.name}: then names {name!r}, which is not another update "
                    "or create operation"
                )
    for i, rule in enumerate(bp.agent_rules):
        target = ops.get(rule.operation)
        if target is None or target.tool_kind != "write":
            problems.append(
                f"agent_rules[{i}]: {rule.operation!r} is not an update or create operation"
            )
            continue
        found = []
        for j, cond in enumerate(rule.refuse_when):
            where = f"agent_rules[{i}].refuse_when[{j}]"
            found += condition_problems(bp, target, cond, where)
        problems += found or _contradiction(bp, target, rule.refuse_when, i, rule.rule)
    tables_shape = shapes(bp)
    for i, law in enumerate(bp.laws):
        try:
            compile_law(law, tables_shape, i)
        except ExpressionError as exc:
            problems.append(f"laws[{i}] ({law.says[:60]}): {exc}")
    return problems


def _contradiction(
    bp: BlueprintDraft, op: Operation, refuse_when: list[Condition], i: int, rule: str
) -> list[str]:
    """An agent rule that refuses, whatever else holds, a value the operation's own check
    accepts by name (``status in ['reserved', 'out']`` and a rule refusing ``status = 'out'``):
    the policy would then state both that it is allowed and that it is refused (car rental run
    10's rules 10 and 17)."""
    if len(refuse_when) != 1:
        return []  # the rule refuses a value only together with something else
    refused = _value_set(bp, op, refuse_when[0])
    if refused is None:
        return []
    for j, cond in enumerate(op.requires):
        allowed = _value_set(bp, op, cond)
        if allowed is None or allowed[0] != refused[0] or not allowed[1] & refused[1]:
            continue
        both = ", ".join(sorted(allowed[1] & refused[1]))
        return [
            f"agent_rules[{i}] ({rule[:60]!r}) refuses {op.name} whenever {refused[0]} is "
            f"{both}, which {op.name}'s requires[{j}] accepts by name: the policy would say both "
            f"that it is allowed and that it is refused. Take {both} out of that check (the tool "
            "then refuses it, a rule of its own) or refuse only together with a further condition"
        ]
    return []


def _value_set(
    bp: BlueprintDraft, op: Operation, cond: Condition
) -> tuple[str, frozenset[str]] | None:
    """The one field a check tests against named values (``status in [...]``, ``x = 'y'``):
    its path (the operation's own record's key left out) and the values; None for another check."""
    if cond.when is not None:
        return None
    try:
        node = condition_node(bp, op, cond)
    except ExpressionError:
        return None
    if isinstance(node, Member) and not node.negated and isinstance(node.options, ListLit):
        path, options = node.operand, list(node.options.items)
    elif isinstance(node, Compare) and node.op == "=":
        path, options = (node.left, [node.right])
        if isinstance(path, Lit):
            path, options = node.right, [node.left]
    else:
        return None
    if not isinstance(path, Path) or not all(isinstance(o, Lit) for o in options):
        return None
    parts = path.parts
    root = own_root(bp, op)
    if not path.dollar and root is not None and parts[0] == root and len(parts) > 1:
        parts = parts[1:]
    text = ("$" if path.dollar else "") + ".".join(parts)
    return text, frozenset(repr(o.value) for o in options if isinstance(o, Lit))


def operation_problems(bp: BlueprintDraft, op: Operation) -> list[str]:
    where = f"operation {op.name}"
    if op.table not in {e.table for e in bp.entities}:
        return [f"{where}: unknown table {op.table!r}; tables are {[e.table for e in bp.entities]}"]
    entity = bp.entity(op.table)
    problems: list[str] = []
    for p, text in op.params.items():
        try:
            check_ident(p, "parameter")
            if p in RESERVED:
                raise ValueError(f"parameter {p!r} is a reserved name")
            ptype = FieldType.parse(text)
            if ptype.base == "ref":
                raise ValueError(f"parameter {p!r}: a key parameter has type str")
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
    if problems:
        return problems
    has_key = entity.key in op.params
    if op.kind in ("read", "update") and not has_key:
        problems.append(f"{where}: needs the parameter {entity.key!r} (the key of {op.table})")
    if op.kind == "create" and has_key:
        problems.append(
            f"{where}: a create operation makes its key with db.new_id, so "
            f"{entity.key!r} cannot be a parameter"
        )
    if op.kind == "quote" and not has_key:
        problems.append(f"{where}: needs the parameter {entity.key!r} (the key of {op.table})")
    if op.kind in ("lookup", "list"):
        problems += _finder_problems(op, entity.field_types(), where)
    elif op.by:
        problems.append(f"{where}: only lookup and list operations take 'by'")
    if op.kind in ("read", "lookup", "list") and (op.requires or op.sets):
        problems.append(f"{where}: a {op.kind} operation has no requires or sets")
    if op.kind == "quote":
        if op.sets:
            problems.append(f"{where}: a quote changes nothing (no sets); it answers its returns")
        if not op.returns:
            problems.append(
                f'{where}: a quote answers what it computes: "returns": {{"total": "..."}}'
            )
    elif op.returns:
        problems.append(f"{where}: only a quote operation has returns")
    problems += _returns_problems(bp, op, where)
    problems += _adds_problems(bp, op, where)
    for i, cond in enumerate(op.requires):
        problems += condition_problems(bp, op, cond, f"{where}: requires[{i}]")
    problems += _effect_problems(bp, op, where)
    used = _used_params(bp, op)
    unused = [p for p in op.params if p not in used]
    if unused:
        problems.append(
            f"{where}: parameter(s) {unused} are used by no check or effect: store them (sets) "
            "or drop them"
        )
    return problems


def _finder_problems(op: Operation, fields: dict[str, FieldType], where: str) -> list[str]:
    if not op.by:
        return [f"{where}: a {op.kind} operation names the fields it matches in 'by'"]
    problems = []
    for f in op.by:
        if f not in fields:
            problems.append(f"{where}: by names unknown field {op.table}.{f}")
    if set(op.params) != set(op.by):
        problems.append(f"{where}: its params must be exactly its by fields {op.by}")
    return problems


def _effect_problems(bp: BlueprintDraft, op: Operation, where: str) -> list[str]:
    problems: list[str] = []
    if op.tool_kind == "write" and not op.sets:
        problems.append(f"{where}: an {op.kind} operation must set something")
    new_fields: set[tuple[str, str]] = set()
    for target_text, value in op.sets.items():
        try:
            target = resolve(bp, op, target_text, effect=True)
            if isinstance(target, ParamRef):
                raise ValueError(f"{target_text!r}: a parameter cannot be set")
            if target.root in op.new_records() and not target.hops:
                new_fields.add((target.root, target.field))  # set, if not yet right
            value_problem(bp, op, target.ftype, value)
        except ValueError as exc:
            problems.append(f"{where}: sets {exc}")
    for name, table in op.new_records().items():
        if table not in {e.table for e in bp.entities}:
            continue
        entity = bp.entity(table)
        missing = [
            f
            for f, t in entity.field_types().items()
            if not t.nullable and (name, f) not in new_fields
        ]
        if missing:
            problems.append(
                f"{where}: the new {table} record{'' if name == 'new' else f' ({name})'} needs "
                f"a value for {missing} "
                f'(sets {{"{name}.{missing[0]}": ...}})'
            )
    return problems


def _returns_problems(bp: BlueprintDraft, op: Operation, where: str) -> list[str]:
    problems = []
    scope = op_scope(bp, op)
    for name, text in op.returns.items():
        try:
            check_ident(name, "a returned value's name")
            infer(parse(text), scope)
        except (ValueError, ExpressionError) as exc:
            problems.append(f"{where}: returns {name}: {exc}")
    return problems


def _adds_problems(bp: BlueprintDraft, op: Operation, where: str) -> list[str]:
    if not op.adds:
        return []
    if op.kind != "create":
        return [f"{where}: only a create operation adds records ('adds')"]
    tables = {e.table for e in bp.entities}
    problems = []
    for name, table in op.adds.items():
        if not re.match(IDENT, name) or name in RESERVED or name in op.params:
            problems.append(f"{where}: adds {name!r}: a new record's name is a fresh identifier")
        if table not in tables:
            problems.append(f"{where}: adds {name!r}: unknown table {table!r}")
    return problems


def _computed_problem(bp: BlueprintDraft, op: Operation, ftype: FieldType, text: str) -> None:
    """ValueError when an expression effect does not parse, reads the new record, or does not
    fit the field it writes."""
    try:
        node = parse(text)
        scope = narrowed(bp, op, op_scope(bp, op, effect=True))
        for n in walk(node):
            if isinstance(n, Path) and not n.dollar and n.parts[0] in op.new_records():
                raise ValueError(
                    f"{text!r} reads {n.text}: an effect's value comes from the parameters and "
                    "the records as they are before the call"
                )
        got = infer(node, scope)
    except ExpressionError as exc:
        raise ValueError(str(exc)) from None
    if not _vfits(got, vtype(ftype)):
        hint = ""
        if ftype.base == "enum":
            hint = (
                " (an enum field takes a constant: when its value depends on the record, write "
                "one operation per value)"
            )
        elif ftype.base == "int" and got.base == "float":
            hint = " (round(x) gives a whole number)"
        elif got.nullable and not ftype.nullable and _vfits(got.plain(), vtype(ftype)):
            hint = (
                " because it may be null: require the nullable value is not null in 'requires', "
                "or write coalesce(x, 0)"
            )
        raise ValueError(
            f"{text!r} is a {got.text()}, which does not fit a {_type_name(ftype)}{hint}"
        )


def narrowed(bp: BlueprintDraft, op: Operation, scope: Scope) -> Scope:
    """The scope with the fields the operation requires to be set (``x is not null`` among its
    checks, unconditionally) typed as never null: its effects may rely on them."""
    from dataclasses import replace as copy_with

    from maestro.domains.expressions import IsNull, TableShape, conjuncts

    sure: dict[str, set[str]] = {}
    for cond in op.requires:
        if cond.when is not None:
            continue
        try:
            node = condition_node(bp, op, cond)
        except ExpressionError:
            continue
        for part in conjuncts(node):
            if isinstance(part, IsNull) and part.negated and isinstance(part.operand, Path):
                try:
                    r = resolve_path(part.operand, scope)
                except ExpressionError:
                    continue
                if r.kind == "field" and r.field is not None:
                    sure.setdefault(r.table, set()).add(r.field)
    if not sure:
        return scope
    tables = dict(scope.tables)
    for table, names in sure.items():
        shape = tables[table]
        fields = {f: (t.plain() if f in names else t) for f, t in shape.fields.items()}
        tables[table] = TableShape(shape.name, shape.key, fields)
    return copy_with(scope, tables=tables)


def _vfits(src: VType, dst: VType) -> bool:
    if src.nullable and not dst.nullable:
        return False
    if dst.base == "float":
        return src.numeric
    if dst.base == "str":
        return src.base in ("str", "enum", "date", "datetime", "ref")
    if dst.base == "enum":
        return src.base == "enum" and set(src.choices) <= set(dst.choices)
    if dst.base == "ref":
        return src.base == "ref" and src.ref == dst.ref
    return src.base == dst.base


def value_problem(bp: BlueprintDraft, op: Operation, ftype: FieldType, value: SetValue) -> None:
    """ValueError when ``value`` cannot be written to a field of ``ftype``."""
    if value is None:
        if not ftype.nullable:
            raise ValueError("null into a field that is not nullable (add ? to its type)")
        return
    if isinstance(value, Computed):
        _computed_problem(bp, op, ftype, value.expr)
        return
    if isinstance(value, Restore):
        try:
            source = resolve(bp, op, value.restore)
        except ValueError as exc:
            raise ValueError(f"restore: {exc}") from None
        if isinstance(source, ParamRef) or not fits(bp, op, source, ftype):
            raise ValueError(
                f"restore {value.restore!r}: put back a field of a record that kept the old "
                f"value, of the type {_type_name(ftype)}"
            )
        return
    if isinstance(value, Adjust):
        if not ftype.numeric:
            raise ValueError("add/subtract on a field that is not a number")
        amount = value.amount
        if isinstance(amount, str):
            try:
                got = infer(parse(amount), op_scope(bp, op))
            except ExpressionError as exc:
                raise ValueError(f"add/subtract {amount!r}: {exc}") from None
            if not got.numeric or got.nullable:
                raise ValueError(
                    f"add/subtract {amount!r}: use a number, a number parameter or an expression giving one"
                )
        return
    if isinstance(value, str) and value.startswith("$"):
        if value == "$today":
            if ftype.base not in ("date", "str"):
                raise ValueError(f"$today into a {ftype.base} field (it is a date)")
            return
        if value == "$now":
            if ftype.base not in ("datetime", "str"):
                raise ValueError(f"$now into a {ftype.base} field (it is a datetime)")
            return
        source = resolve(bp, op, value[1:] if "." in value else value)
        if not fits(bp, op, source, ftype):
            hint = ""
            if source.ftype.nullable and not ftype.nullable:
                hint = (
                    ": it may be null; require it is not null in 'requires' "
                    f'({{"check": "{value[1:]} is not null"}}), or make the field nullable'
                )
                plain = replace(source, ftype=source.ftype.model_copy(update={"nullable": False}))
                if _required(bp, op, value[1:]) and fits(bp, op, plain, ftype):
                    return
            raise ValueError(
                f"{value!r} ({_type_text(source)}{'?' if source.ftype.nullable else ''}) does not "
                f"fit a {_type_name(ftype)}{hint}"
            )
        return
    if not ftype.accepts(value):
        raise ValueError(f"{value!r} is not a {_type_name(ftype)} value")


def _required(bp: BlueprintDraft, op: Operation, path: str) -> bool:
    """Whether the operation requires ``path is not null`` unconditionally."""
    from maestro.domains.expressions import IsNull, conjuncts, unparse

    for cond in op.requires:
        if cond.when is not None:
            continue
        try:
            node = condition_node(bp, op, cond)
        except ExpressionError:
            continue
        for part in conjuncts(node):
            if (
                isinstance(part, IsNull)
                and part.negated
                and unparse(part.operand).lstrip("$") == path
            ):
                return True
    return False


def fits(bp: BlueprintDraft, op: Operation, source: Subject, dst: FieldType) -> bool:
    """Whether values of ``source`` may be written to a field of type ``dst``."""
    src = source.ftype
    if isinstance(source, ParamRef) and dst.base == "ref":
        return record_params(bp, op).get(source.name) == dst.ref
    if src.nullable and not dst.nullable:
        return False
    if dst.base == "str":
        return src.base in ("str", "enum", "date", "datetime", "ref")
    if dst.base == "enum":
        return src.base == "enum" and set(src.choices) <= set(dst.choices)
    if dst.base == "ref":
        return src.base == "ref" and src.ref == dst.ref
    if dst.base == "float":
        return src.base in ("int", "float")
    return src.base == dst.base


def _type_name(ftype: FieldType) -> str:
    if ftype.base == "enum":
        return "enum:" + "|".join(ftype.choices)
    return f"ref:{ftype.ref}" if ftype.base == "ref" else ftype.base


def _type_text(source: Subject) -> str:
    return _type_name(source.ftype)


def condition_problems(bp: BlueprintDraft, op: Operation, cond: Condition, where: str) -> list[str]:
    if cond.is_expression:
        problem = expression_problem(bp, op, cond)
        return [f"{where}: {problem}"] if problem else []
    if cond.when is not None:
        try:
            from maestro.domains.expressions import check_condition

            check_condition(parse(cond.when), op_scope(bp, op))
        except ExpressionError as exc:
            return [f"{where}: when: {exc}"]
    try:
        subject = resolve(bp, op, cond.check)
    except ValueError as exc:
        return [f"{where}: {exc}"]
    ftype = subject.ftype
    test, value = cond.test, cond.value
    label = f"{where}: {cond.check} {test}"
    if test in NULL_TESTS:
        if not ftype.nullable:
            return [f"{label}: {cond.check} is not nullable, so it is never null"]
        return []
    if test in ("in", "not_in"):
        if not isinstance(value, list) or not value:
            return [f"{label} needs a non-empty list of values"]
        bad = [v for v in value if v is None or not ftype.accepts(v)]
        return [f"{label}: {bad} are not {_type_name(ftype)} values"] if bad else []
    if test == "equals":
        if isinstance(value, str) and value.startswith("$"):
            try:
                source = resolve(bp, op, value)
            except ValueError as exc:
                return [f"{label}: {exc}"]
            ok = fits(bp, op, source, ftype.model_copy(update={"nullable": False}))
            return [] if ok else [f"{label}: {value} does not fit {_type_name(ftype)}"]
        if value is None or isinstance(value, list) or not ftype.accepts(value):
            return [f"{label}: {value!r} is not a {_type_name(ftype)} value"]
        return []
    if test in NUMERIC_TESTS:
        if not ftype.numeric:
            return [f"{label}: {cond.check} is a {ftype.base}, not a number"]
        if isinstance(value, str) and value.startswith("$"):
            try:
                source = resolve(bp, op, value)
            except ValueError as exc:
                return [f"{label}: {exc}"]
            ok = isinstance(source, ParamRef) and source.ftype.numeric
            return [] if ok else [f"{label}: {value} is not a number parameter"]
        if isinstance(value, bool) or not isinstance(value, int | float):
            return [f"{label} needs a number or a number parameter ($name)"]
        return []
    wanted = ("datetime",) if test in HOUR_TESTS else ("date", "datetime")
    if ftype.base not in wanted:
        return [f"{label}: {cond.check} is a {ftype.base}, not a {' or '.join(wanted)}"]
    if not _whole(value):
        unit = "hours" if test in HOUR_TESTS else "days"
        return [f"{label} needs a whole number of {unit} >= 0"]
    return []


def _whole(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and float(value).is_integer()
        and value >= 0
    )


def _used_params(bp: BlueprintDraft, op: Operation) -> set[str]:
    used = set(op.by) | {bp.entity(op.table).key}
    conds = list(op.requires) + [c for r in bp.agent_rules_of(op.name) for c in r.refuse_when]
    texts: list[str] = [c.check for c in conds if not c.is_expression] + list(op.sets)
    exprs: list[str] = [c.check for c in conds if c.is_expression]
    exprs += [c.when for c in conds if c.when] + list(op.returns.values())
    values: list[Any] = [c.value for c in conds] + list(op.sets.values())
    for v in values:
        if isinstance(v, Adjust):
            v = v.amount
            if isinstance(v, str):
                exprs.append(v)
                continue
        if isinstance(v, Computed):
            exprs.append(v.expr)
        elif isinstance(v, Restore):
            texts.append(v.restore)
        elif isinstance(v, str) and v.startswith("$"):
            texts.append(v)
    for text in texts:
        head = text.lstrip("$").split(".")[0]
        if re.match(IDENT, head):
            used.add(head)
    for text in exprs:
        try:
            used |= params_of(bp, op, parse(text))
        except ExpressionError:
            continue
    return used
