"""The grammar of torch operator-schema strings: types, arguments and returns, parsed without torch.

`ops.py` builds its `OpSchema` model on this parse and cross-checks it against torch's own parse.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ParsedArg", "ParsedSchema", "SchemaSyntaxError", "SchemaType", "parse_schema_text", "parse_type"]

# Type constructors whose parentheses hold type parameters (elsewhere parentheses hold an alias annotation).
_GENERICS = frozenset({"Dict", "Future", "Await", "RRef", "Union", "Tuple"})
_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")


class SchemaSyntaxError(ValueError):
    """A schema or type string that does not follow torch's schema grammar."""


@dataclass(frozen=True)
class SchemaType:
    """A schema type: kind "base" (name), "list" (args[0], size), "optional" (args[0]), "tuple" or "generic"."""

    kind: str
    name: str = ""
    args: tuple[SchemaType, ...] = ()
    size: int | None = None

    def __str__(self) -> str:
        """The type spelled as torch prints it, alias annotations left out: `SymInt[2]`, `Tensor?[]`."""
        if self.kind == "list":
            return f"{self.args[0]}[{'' if self.size is None else self.size}]"
        if self.kind == "optional":
            return f"{self.args[0]}?"
        if self.kind == "tuple":
            return "(" + ", ".join(map(str, self.args)) + ")"
        if self.kind == "generic":
            return f"{self.name}(" + ", ".join(map(str, self.args)) + ")"
        return self.name

    @property
    def elem(self) -> SchemaType:
        """The element type of a list or optional."""
        if self.kind not in ("list", "optional"):
            raise AttributeError(f"type {self} has no element type")
        return self.args[0]


@dataclass(frozen=True)
class ParsedArg:
    """One argument or return as spelled in a schema string."""

    name: str
    type: SchemaType
    alias: str | None
    default: str | None
    kwarg_only: bool


@dataclass(frozen=True)
class ParsedSchema:
    """A schema string split into name, overload, arguments and returns."""

    name: str
    overload: str
    arguments: tuple[ParsedArg, ...]
    returns: tuple[ParsedArg, ...]
    is_vararg: bool
    is_varret: bool


class _Parser:
    """A recursive-descent reader over one schema or type string."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> SchemaSyntaxError:
        shown = self.text[self.pos : self.pos + 20] or "end of text"
        return SchemaSyntaxError(f"expected {what} at offset {self.pos} of {self.text!r}, got {shown!r}")

    def ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] == " ":
            self.pos += 1

    def peek(self) -> str:
        self.ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def eat(self, token: str) -> bool:
        self.ws()
        if self.text.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.eat(token):
            raise self.fail(repr(token))

    def ident(self) -> str:
        self.ws()
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in _IDENT_CHARS:
            self.pos += 1
        if start == self.pos:
            raise self.fail("a name")
        return self.text[start : self.pos]

    def alias(self) -> str | None:
        if self.peek() != "(":
            return None
        end = self.text.find(")", self.pos)
        if end < 0:
            raise self.fail("')' closing an alias annotation")
        inner = self.text[self.pos + 1 : end].strip()
        self.pos = end + 1
        return inner

    def type(self) -> tuple[SchemaType, str | None]:
        alias: str | None = None
        if self.eat("("):
            elems = self.type_list(")")
            t = SchemaType("tuple", args=elems)
        else:
            name = self.ident()
            if name in _GENERICS and self.peek() == "(":
                self.expect("(")
                t = SchemaType("generic", name, self.type_list(")"))
            else:
                t = SchemaType("base", name)
        alias = self.alias() or alias
        while True:
            if self.eat("["):
                self.ws()
                start = self.pos
                while self.pos < len(self.text) and self.text[self.pos].isdigit():
                    self.pos += 1
                size = int(self.text[start : self.pos]) if self.pos > start else None
                self.expect("]")
                t = SchemaType("list", args=(t,), size=size)
                alias = self.alias() or alias
            elif self.eat("?"):
                t = SchemaType("optional", args=(t,))
            else:
                return t, alias

    def type_list(self, close: str) -> tuple[SchemaType, ...]:
        out: list[SchemaType] = []
        while not self.eat(close):
            if out:
                self.expect(",")
            out.append(self.type()[0])
        return tuple(out)

    def default(self) -> str:
        self.ws()
        start, depth, quote = self.pos, 0, ""
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if quote:
                if c == "\\":
                    self.pos += 1
                elif c == quote:
                    quote = ""
            elif c in "\"'":
                quote = c
            elif c in "[(":
                depth += 1
            elif c in "])":
                if depth == 0:
                    break
                depth -= 1
            elif c == "," and depth == 0:
                break
            self.pos += 1
        if quote or self.pos == start:
            raise self.fail("a default value")
        return self.text[start : self.pos].strip()

    def arg(self, kwarg_only: bool, returns: bool) -> ParsedArg:
        t, alias = self.type()
        name = ""
        if self.peek() not in (",", ")", "", "="):
            name = self.ident()
        default = self.default() if not returns and self.eat("=") else None
        return ParsedArg(name, t, alias, default, kwarg_only)


def parse_type(text: str) -> SchemaType:
    """Parse one schema type such as `Tensor(a!)[]`, `SymInt[2]?` or `Dict(str, t)` (alias dropped)."""
    p = _Parser(text)
    t, _ = p.type()
    if p.peek():
        raise p.fail("end of type")
    return t


def parse_schema_text(text: str) -> ParsedSchema:
    """Split a full schema string `ns::op.overload(args) -> returns` into its parts."""
    p = _Parser(text)
    name = p.ident()
    while p.eat("::"):
        name += "::" + p.ident()
    overload = ""
    if "." in name.rpartition("::")[2]:
        head, _, overload = name.rpartition(".")
        name = head
    p.expect("(")
    args: list[ParsedArg] = []
    kwarg_only = vararg = False
    while not p.eat(")"):
        if args or kwarg_only or vararg:
            p.expect(",")
        if p.eat("*"):
            kwarg_only = True
        elif p.eat("..."):
            vararg = True
        else:
            args.append(p.arg(kwarg_only, returns=False))
    p.expect("->")
    rets: list[ParsedArg] = []
    varret = False
    if p.eat("..."):
        varret = True
    elif p.peek() == "(" and not _starts_tuple_type(p):
        p.expect("(")
        while not p.eat(")"):
            if rets or varret:
                p.expect(",")
            if p.eat("..."):
                varret = True
            else:
                rets.append(p.arg(False, returns=True))
    else:
        rets.append(p.arg(False, returns=True))
    if p.peek():
        raise p.fail("end of schema")
    return ParsedSchema(name, overload, tuple(args), tuple(rets), vararg, varret)


def _starts_tuple_type(p: _Parser) -> bool:
    """Whether the '(' at the cursor opens a single tuple-typed return such as `(str, t)[]`."""
    depth, i = 0, p.pos
    while i < len(p.text):
        if p.text[i] == "(":
            depth += 1
        elif p.text[i] == ")":
            depth -= 1
            if depth == 0:
                return p.text[i + 1 : i + 2] in ("[", "?")
        i += 1
    return False
