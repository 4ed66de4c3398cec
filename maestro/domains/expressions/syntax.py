"""The expression language's text and syntax tree: a tokenizer and a recursive-descent parser.

Nothing here evaluates anything: the text becomes a tree of frozen dataclasses that
``checking.py`` types and ``evaluation.py`` evaluates. The input is bounded (length, depth,
nodes), so a hostile text costs at most a linear scan.

::

    expr     := or
    or       := and ('or' and)*
    and      := not ('and' not)*
    not      := 'not' not | compare
    compare  := sum [('=' | '!=' | '<' | '<=' | '>' | '>=') sum
                    | ['not'] 'in' sum
                    | 'is' ['not'] 'null']
    sum      := product (('+' | '-') product)*
    product  := unary (('*' | '/') unary)*
    unary    := '-' unary | atom
    atom     := number | 'text' | true | false | null | today | now | path
              | name '(' [expr (',' expr)*] ')'
              | ('count' | 'sum') '(' table ['.' field] ['where' expr] ')'
              | '(' expr ')' | '[' [expr (',' expr)*] ']'
    path     := ['$'] name ('.' name)*
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

#: Bounds on what one expression may be: a blueprint's expression is a line, not a program.
MAX_LENGTH = 1000
MAX_DEPTH = 32
MAX_NODES = 200

FUNCTIONS = (
    "round",
    "min",
    "max",
    "abs",
    "days",
    "hours",
    "days_between",
    "hours_between",
    "date",
    "datetime",
    "if",
    "coalesce",
)
AGGREGATES = ("count", "sum")
KEYWORDS = frozenset(
    {"and", "or", "not", "in", "is", "null", "true", "false", "today", "now", "where"}
)
COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")


class ExpressionError(ValueError):
    """An expression that does not parse, does not type, or cannot be evaluated; the message
    names the expression and what is wrong in it."""


# ----- the tree ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """Base of every syntax node."""

    def children(self) -> tuple[Node, ...]:
        return ()


@dataclass(frozen=True)
class Lit(Node):
    """A constant: a number, a text, true, false or null."""

    value: Any


@dataclass(frozen=True)
class ListLit(Node):
    items: tuple[Node, ...]

    def children(self) -> tuple[Node, ...]:
        return self.items


@dataclass(frozen=True)
class Clock(Node):
    """``today`` (a date) or ``now`` (a datetime): the domain's clock."""

    name: str


@dataclass(frozen=True)
class Path(Node):
    """``$quantity``, ``$booking_id.fare``, ``booking_id.sailing_id.departs_at``, ``status``,
    ``self``, ``self.passenger_id``: what each names depends on the scope (``checking.py``)."""

    dollar: bool
    parts: tuple[str, ...]

    @property
    def text(self) -> str:
        return ("$" if self.dollar else "") + ".".join(self.parts)


@dataclass(frozen=True)
class Neg(Node):
    operand: Node

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Arith(Node):
    op: str
    left: Node
    right: Node

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Compare(Node):
    op: str
    left: Node
    right: Node

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Member(Node):
    """``x in [a, b]`` (``negated``: ``x not in [...]``)."""

    operand: Node
    options: Node
    negated: bool = False

    def children(self) -> tuple[Node, ...]:
        return (self.operand, self.options)


@dataclass(frozen=True)
class IsNull(Node):
    operand: Node
    negated: bool = False

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Not(Node):
    operand: Node

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Logic(Node):
    """``and`` / ``or`` over two or more operands."""

    op: str
    items: tuple[Node, ...]

    def children(self) -> tuple[Node, ...]:
        return self.items


@dataclass(frozen=True)
class Call(Node):
    name: str
    args: tuple[Node, ...]

    def children(self) -> tuple[Node, ...]:
        return self.args


@dataclass(frozen=True)
class Aggregate(Node):
    """``count(returns where rental_id = $rental_id)``, ``sum(charges.amount where ...)``:
    over the records of ``table`` for which ``where`` holds (every record, without one).
    Inside ``where`` a name that is a field of ``table`` is the counted record's."""

    kind: str
    table: str
    field: str | None
    where: Node | None

    def children(self) -> tuple[Node, ...]:
        return (self.where,) if self.where is not None else ()


def walk(node: Node) -> list[Node]:
    """The node and every node under it, parents first."""
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(reversed(n.children()))
    return out


def conjuncts(node: Node) -> list[Node]:
    """The operands of a top-level ``and`` (the node itself when it is not one)."""
    if isinstance(node, Logic) and node.op == "and":
        return [c for item in node.items for c in conjuncts(item)]
    return [node]


# ----- printing ---------------------------------------------------------------------------------

_PRECEDENCE = {"or": 1, "and": 2, "not": 3, "cmp": 4, "+": 5, "-": 5, "*": 6, "/": 6, "neg": 7}


def unparse(node: Node, parent: int = 0) -> str:
    """The canonical text of a tree (what prompts and messages show)."""
    text, own = _unparse(node)
    return f"({text})" if own < parent else text


def _literal(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} has no literal")
        text = format(Decimal(repr(value)), "f")  # never 1e-10: the tokenizer reads digits
        return text if "." in text else text + ".0"
    return repr(value)


def _unparse(node: Node) -> tuple[str, int]:
    if isinstance(node, Lit):
        return _literal(node.value), 9
    if isinstance(node, ListLit):
        return "[" + ", ".join(unparse(i) for i in node.items) + "]", 9
    if isinstance(node, Clock):
        return node.name, 9
    if isinstance(node, Path):
        return node.text, 9
    if isinstance(node, Neg):
        return "-" + unparse(node.operand, _PRECEDENCE["neg"]), _PRECEDENCE["neg"]
    if isinstance(node, Arith):
        p = _PRECEDENCE[node.op]
        right = unparse(node.right, p + 1)  # left-associative
        return f"{unparse(node.left, p)} {node.op} {right}", p
    if isinstance(node, Compare):
        p = _PRECEDENCE["cmp"]
        return f"{unparse(node.left, p + 1)} {node.op} {unparse(node.right, p + 1)}", p
    if isinstance(node, Member):
        p = _PRECEDENCE["cmp"]
        word = "not in" if node.negated else "in"
        return f"{unparse(node.operand, p + 1)} {word} {unparse(node.options, p + 1)}", p
    if isinstance(node, IsNull):
        p = _PRECEDENCE["cmp"]
        return f"{unparse(node.operand, p + 1)} is {'not ' if node.negated else ''}null", p
    if isinstance(node, Not):
        p = _PRECEDENCE["not"]
        return "not " + unparse(node.operand, p), p
    if isinstance(node, Logic):
        p = _PRECEDENCE[node.op]
        return f" {node.op} ".join(unparse(i, p + 1) for i in node.items), p
    if isinstance(node, Call):
        return f"{node.name}({', '.join(unparse(a) for a in node.args)})", 9
    if isinstance(node, Aggregate):
        inner = node.table + (f".{node.field}" if node.field else "")
        if node.where is not None:
            inner += " where " + unparse(node.where)
        return f"{node.kind}({inner})", 9
    raise TypeError(f"not a syntax node: {node!r}")


# ----- tokens -----------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<num>[0-9]+(?:\.[0-9]+)?)
      | (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
      | (?P<name>\$?[A-Za-z_][A-Za-z0-9_]*)
      | (?P<op><=|>=|!=|==|<>|[=<>+\-*/(),.\[\]])
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class Token:
    kind: str  # num, str, name, op, end
    text: str
    at: int


def tokens(text: str) -> list[Token]:
    out: list[Token] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            at = pos + (len(text[pos:]) - len(text[pos:].lstrip()))
            raise ExpressionError(f"{text!r}: unexpected {text[at]!r} at character {at + 1}")
        kind = m.lastgroup or "op"
        raw = m.group(kind)
        out.append(Token(kind, raw, m.start(kind)))
        pos = m.end()
    out.append(Token("end", "", len(text)))
    return out


def _unquote(raw: str) -> str:
    body = raw[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


# ----- the parser -------------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = tokens(text)
        self.i = 0
        self.nodes = 0
        self.depth = 0

    # helpers
    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def error(self, what: str, tok: Token | None = None) -> ExpressionError:
        t = tok or self.tok
        found = "the end" if t.kind == "end" else repr(t.text)
        return ExpressionError(f"{self.text!r}: {what}, found {found} at character {t.at + 1}")

    def is_word(self, word: str) -> bool:
        return self.tok.kind == "name" and self.tok.text.lower() == word

    def is_op(self, op: str) -> bool:
        return self.tok.kind == "op" and self.tok.text == op

    def take(self) -> Token:
        t = self.tok
        self.i += 1
        return t

    def expect_op(self, op: str, what: str) -> None:
        if not self.is_op(op):
            raise self.error(what)
        self.i += 1

    def node(self, n: Node) -> Node:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise ExpressionError(f"{self.text[:80]!r}...: more than {MAX_NODES} parts")
        return n

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExpressionError(f"{self.text[:80]!r}...: nested more than {MAX_DEPTH} deep")

    # grammar
    def parse(self) -> Node:
        if not self.text.strip():
            raise ExpressionError("an empty expression")
        node = self.expr()
        if self.tok.kind != "end":
            raise self.error("expected an operator or the end")
        return node

    def expr(self) -> Node:
        self.enter()
        try:
            return self.logic("or", self.conj)
        finally:
            self.depth -= 1

    def conj(self) -> Node:
        return self.logic("and", self.negation)

    def logic(self, word: str, sub: Any) -> Node:
        items = [sub()]
        while self.is_word(word):
            self.take()
            items.append(sub())
        return items[0] if len(items) == 1 else self.node(Logic(word, tuple(items)))

    def negation(self) -> Node:
        if self.is_word("not"):
            self.take()
            self.enter()
            try:
                return self.node(Not(self.negation()))
            finally:
                self.depth -= 1
        return self.compare()

    def compare(self) -> Node:
        left = self.sum()
        t = self.tok
        if t.kind == "op" and t.text in ("=", "==", "!=", "<>", "<", "<=", ">", ">="):
            self.take()
            op = {"==": "=", "<>": "!="}.get(t.text, t.text)
            return self.node(Compare(op, left, self.sum()))
        if self.is_word("in"):
            self.take()
            return self.node(Member(left, self.sum()))
        if self.is_word("not"):
            self.take()
            if not self.is_word("in"):
                raise self.error("expected 'in' after 'not' here")
            self.take()
            return self.node(Member(left, self.sum(), negated=True))
        if self.is_word("is"):
            self.take()
            negated = False
            if self.is_word("not"):
                self.take()
                negated = True
            if not self.is_word("null"):
                raise self.error("expected 'null' after 'is'")
            self.take()
            return self.node(IsNull(left, negated))
        return left

    def sum(self) -> Node:
        node = self.product()
        while self.tok.kind == "op" and self.tok.text in ("+", "-"):
            op = self.take().text
            node = self.node(Arith(op, node, self.product()))
        return node

    def product(self) -> Node:
        node = self.unary()
        while self.tok.kind == "op" and self.tok.text in ("*", "/"):
            op = self.take().text
            node = self.node(Arith(op, node, self.unary()))
        return node

    def unary(self) -> Node:
        if self.is_op("-"):
            self.take()
            self.enter()
            try:
                operand = self.unary()
            finally:
                self.depth -= 1
            if isinstance(operand, Lit) and isinstance(operand.value, int | float):
                return self.node(Lit(-operand.value))
            return self.node(Neg(operand))
        return self.atom()

    def atom(self) -> Node:
        t = self.tok
        if t.kind == "num":
            self.take()
            value: Any = float(t.text) if "." in t.text else int(t.text)
            return self.node(Lit(value))
        if t.kind == "str":
            self.take()
            return self.node(Lit(_unquote(t.text)))
        if self.is_op("("):
            self.take()
            inner = self.expr()
            self.expect_op(")", "expected ')'")
            return inner
        if self.is_op("["):
            self.take()
            items: list[Node] = []
            if not self.is_op("]"):
                items.append(self.expr())
                while self.is_op(","):
                    self.take()
                    items.append(self.expr())
            self.expect_op("]", "expected ',' or ']' in a list")
            return self.node(ListLit(tuple(items)))
        if t.kind != "name":
            raise self.error("expected a value, a name or '('")
        word = t.text.lower()
        if word in ("true", "false", "null"):
            self.take()
            return self.node(Lit({"true": True, "false": False, "null": None}[word]))
        if word in ("today", "now") and self.toks[self.i + 1].text != ".":
            self.take()
            return self.node(Clock(word))
        if word in KEYWORDS:
            raise self.error("expected a value, not the word " + repr(word))
        if self.toks[self.i + 1].kind == "op" and self.toks[self.i + 1].text == "(":
            return self.call()
        return self.path()

    def path(self) -> Node:
        first = self.take()
        dollar = first.text.startswith("$")
        parts = [first.text.lstrip("$")]
        if not parts[0]:
            raise self.error("expected a name after '$'", first)
        while self.is_op("."):
            self.take()
            if self.tok.kind != "name" or self.tok.text.startswith("$"):
                raise self.error("expected a field name after '.'")
            parts.append(self.take().text)
        return self.node(Path(dollar, tuple(parts)))

    def call(self) -> Node:
        name_tok = self.take()
        name = name_tok.text
        self.take()  # (
        if name in AGGREGATES:
            return self.aggregate(name)
        if name not in FUNCTIONS:
            raise ExpressionError(
                f"{self.text!r}: unknown function {name!r} at character {name_tok.at + 1}; "
                f"functions are {', '.join(FUNCTIONS + AGGREGATES)}"
            )
        args: list[Node] = []
        if not self.is_op(")"):
            args.append(self.expr())
            while self.is_op(","):
                self.take()
                args.append(self.expr())
        self.expect_op(")", f"expected ',' or ')' in {name}(...)")
        return self.node(Call(name, tuple(args)))

    def aggregate(self, kind: str) -> Node:
        if self.tok.kind != "name" or self.tok.text.startswith("$"):
            raise self.error(f"expected a table name in {kind}(...)")
        table = self.take().text
        field = None
        if self.is_op("."):
            self.take()
            if self.tok.kind != "name":
                raise self.error("expected a field name after '.'")
            field = self.take().text
        where = None
        if self.is_word("where"):
            self.take()
            where = self.expr()
        self.expect_op(")", f"expected 'where' or ')' in {kind}(...)")
        return self.node(Aggregate(kind, table, field, where))


def parse(text: str) -> Node:
    """The syntax tree of an expression; :class:`ExpressionError` saying where it fails."""
    if not isinstance(text, str):
        raise ExpressionError(f"an expression is a text, not {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"{text[:60]!r}...: longer than {MAX_LENGTH} characters")
    return _Parser(text).parse()
