"""OpenFOAM's dictionary syntax, split into tokens the way OpenFOAM's own reader splits it.

Mirrors ``ISstream::read(token&)`` of OpenFOAM v1912 and later (checked against v1912's
``foamDictionary``): ``//`` and ``/* */`` comments; strings in double quotes (``\\"`` an
escaped quote, a backslash before a newline joins lines, an unescaped newline ends the
file's reading); punctuation ``; ( ) [ ] { } : , = + * /`` (``-`` alone); numbers; words
of any other characters but white space, quotes, ``/ ; { }`` (a word keeps balanced
parentheses: ``div(phi,U)``); ``#directive`` (white space and comments may stand between
``#`` and its name); ``#{ … #}`` verbatim code; ``$var``, ``${var}`` and ``${{ expr }}``
(white space and comments may follow ``$``). Where a directive reads raw text and not
tokens, the text comes as one ``raw`` token: the rest of the line after ``#if``/``#elif``,
the braces of ``#eval { … }``, ``#message { … }``, ``#word { … }``.

In a file written in OpenFOAM's binary format (``format binary;`` in its header) the raw
bytes of a list are skipped by their declared size; a file whose binary data cannot be
sized raises `BinaryData`. A case template's ``{{ placeholder }}`` is part of the word or
string it stands in (the token's ``placeholder`` is true).

Plain Python, no Django: shared by the case checks (orchestration.case.casecheck) and the case
inspection (orchestration.case.foamdict).
"""

from __future__ import annotations

import re

__all__ = ["BULK_CHARS", "BULK_MIN", "BinaryData", "Token", "number_starts", "tokenize"]

SPACE = " \t\n\v\f\r"
PUNCTUATION = frozenset(";()[]{}:,=+*/")
_NUMBER = re.compile(r"[-.0-9][-+.0-9eE]*")
_VALID_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_WORD = re.compile(r"[^ \t\n\v\f\r\"'/;{}\x00]+")
_VARIABLE = re.compile(r"[^ \t\n\v\f\r\"';{}\x00]+")  # a word that may hold '/' (scoping)
_SPACES = re.compile(r"[ \t\n\v\f\r]+")
_SKIP = re.compile(r"(?:[ \t\n\v\f\r]+|//[^\n]*|/\*.*?\*/)*", re.S)  # white space, comments
# long runs of numbers in lists: at least BULK_MIN of BULK_CHARS after a '(' (bulk mode)
BULK_CHARS = frozenset(" \t\n\v\f\r0123456789.eE+-()")
BULK_MIN = 512
_BULK = re.compile(rf"[ \t\n\v\f\r0-9.eE+\-()]{{{BULK_MIN},}}")
_RAW_AFTER = frozenset(("#eval", "#message", "#word"))
_LINE_AFTER = frozenset(("#if", "#elif"))
# components of the types of OpenFOAM's contiguous binary lists (List<T> N(raw bytes))
_COMPONENTS = {
    "label": (1, "label"),
    "scalar": (1, "scalar"),
    "vector": (3, "scalar"),
    "point": (3, "scalar"),
    "sphericalTensor": (1, "scalar"),
    "symmTensor": (6, "scalar"),
    "tensor": (9, "scalar"),
    "vector2D": (2, "scalar"),
    "sphericalTensor2D": (1, "scalar"),
    "symmTensor2D": (3, "scalar"),
    "tensor2D": (4, "scalar"),
    "complex": (2, "scalar"),
    "bool": (1, "bool"),
}
# the element of a file's top-level binary list, by its header's class
_CLASS_LISTS = {
    "labelList": "label",
    "faceCompactList": "label",
    "cellCompactList": "label",
    "vectorField": "vector",
    "pointField": "vector",
    "scalarField": "scalar",
    "boolList": "bool",
}


class BinaryData(ValueError):
    """The file holds bytes OpenFOAM's dictionary reader would not read as text (binary data
    this module cannot size, or a NUL byte), or more tokens than the caller allows."""


class Token:
    """One token. `kind`: word, number, string, punct, directive, variable, expression,
    verbatim, raw, data (a long run of numbers and parentheses, in bulk mode), bad (a
    character OpenFOAM refuses; `text` says which)."""

    __slots__ = ("kind", "line", "placeholder", "text")

    def __init__(self, kind: str, text: str, line: int, placeholder: bool = False) -> None:
        self.kind, self.text, self.line, self.placeholder = kind, text, line, placeholder

    def is_punct(self, char: str) -> bool:
        return self.kind == "punct" and self.text == char

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.text!r}, line {self.line})"


class _Lexer:
    def __init__(self, text: str, templates: bool, bulk: bool, limit: int | None) -> None:
        self.s, self.i, self.n, self.line = text, 0, len(text), 1
        self.limit = limit
        self.templates, self.bulk = templates, bulk
        self.out: list[Token] = []
        self.binary: tuple[int, int] | None = None  # bytes of a label and of a scalar
        self.list_class: str | None = None  # the header's class, for top-level binary lists
        self.depth = 0  # ( { nesting of the tokens so far
        self.header_seen = False

    # -- characters -------------------------------------------------------------------

    def _advance(self, end: int) -> str:
        text = self.s[self.i : end]
        self.line += text.count("\n")
        self.i = end
        return text

    def skip_space(self) -> bool:
        """Skip white space and comments; False at the end of the text (or of a comment
        that is never closed: OpenFOAM stops reading there)."""
        s, i = self.s, self.i
        end = _SKIP.match(s, i).end()  # type: ignore[union-attr]  # matches the empty string
        if end != i:
            self.line += s.count("\n", i, end)
            self.i = end
        if end >= self.n:
            return False
        if s.startswith("/*", end):  # a comment never closed
            self._advance(self.n)
            return False
        return True

    def emit(self, kind: str, text: str, line: int, placeholder: bool = False) -> Token:
        token = Token(kind, text, line, placeholder)
        self.out.append(token)
        if kind == "punct" and text in "({":
            self.depth += 1
        elif kind == "punct" and text in ")}":
            self.depth -= 1
        return token

    # -- tokens -------------------------------------------------------------------------

    def run(self) -> list[Token]:
        while self.skip_space():
            if self.limit is not None and len(self.out) > self.limit:
                raise BinaryData(f"line {self.line}: more than {self.limit:,} tokens")
            s, i, line = self.s, self.i, self.line
            c = s[i]
            if c == "\x00":
                raise BinaryData(f"line {line}: a NUL byte")
            if self.templates and s.startswith("{{", i):
                self.word(line)
            elif c == "(" and self.bulk and self.binary is None and (bulk := _BULK.match(s, i)):
                run = self._advance(bulk.end())
                change = run.count("(") - run.count(")")
                self.depth += change
                self.out.append(Token("data", f"{change:+d}", line))
            elif c in PUNCTUATION:
                self.i += 1
                self.emit("punct", c, line)
                if c == "}" and self.depth == 0 and not self.header_seen:
                    self.header_seen = True
                    self.header_end()
            elif c == '"':
                if not self.string(line):
                    break
            elif c == "#":
                if not self.hash(line):
                    break
            elif c == "$":
                if not self.variable(line):
                    break
            elif c in "-.0123456789":
                self.number(line)
            elif c == "'":
                self.i += 1
                self.emit("bad", "'", line)
            else:
                self.word(line)
        return self.out

    def word(self, line: int) -> Token:
        s, start = self.s, self.i
        depth, placeholder = 0, False
        while self.i < self.n:
            if self.templates and s.startswith("{{", self.i):
                end = s.find("}}", self.i + 2)
                self._advance(self.n if end < 0 else end + 2)
                placeholder = True
                continue
            match = _WORD.match(s, self.i)
            if not match:
                break
            end = match.end()
            if ")" in s[self.i : end] or "(" in s[self.i : end]:
                for j in range(self.i, end):  # a ')' closing nothing ends the word
                    if s[j] == "(":
                        depth += 1
                    elif s[j] == ")":
                        if depth == 0:
                            end = j
                            break
                        depth -= 1
            if end == self.i:
                break
            self.i = end  # a word holds no newline
            if end < match.end():
                break
        if self.i == start:  # a lone ')' after a word's balanced part: punctuation
            self.i += 1
            return self.emit("punct", s[start], line)
        return self.emit("word", s[start : self.i], line, placeholder)

    def number(self, line: int) -> None:
        match = _NUMBER.match(self.s, self.i)
        assert match is not None
        text = match.group()
        self.i = match.end()
        if text == "-":
            self.emit("punct", "-", line)
            return
        valid = _VALID_NUMBER.fullmatch(text) is not None
        self.emit("number" if valid else "bad", text, line)
        if self.binary is not None and valid and text.isdigit():
            self.binary_list(int(text))

    def string(self, line: int) -> bool:
        s, j, parts = self.s, self.i + 1, []
        start = j
        while j < self.n:
            c = s[j]
            if c == '"':
                break
            if c == "\\" and j + 1 < self.n and s[j + 1] in '"\n':
                parts.append(s[start:j])
                start = j + 1
                j += 2
                continue
            if c == "\\" and j + 1 < self.n and s[j + 1] == "\\":
                j += 2  # a pair of backslashes escapes nothing (both are kept)
                continue
            if c == "\n":  # an unescaped newline: OpenFOAM stops reading the file
                self._advance(self.n)
                return False
            j += 1
        if j >= self.n:
            self._advance(self.n)
            return False
        parts.append(s[start:j])
        text = "".join(parts)
        self._advance(j + 1)
        self.emit("string", text, line, self.templates and "{{" in text)
        return True

    def hash(self, line: int) -> bool:
        s = self.s
        if s.startswith("#{", self.i):
            end = s.find("#}", self.i + 2)
            if end < 0:
                self._advance(self.n)
                return False
            text = self._advance(end + 2)[2:-2]
            self.emit("verbatim", text, line)
            return True
        self.i += 1
        spaced = self.i < self.n and (s[self.i] in SPACE or s.startswith(("//", "/*"), self.i))
        if not self.skip_space():
            self.emit("directive", "#", line)
            return False
        if spaced and s[self.i] == "{":
            # OpenFOAM v1912 reads '# {' as verbatim code, later versions as a '{': refused
            self.emit("bad", "# {", line)
            return True
        if not _WORD.match(s, self.i) or s[self.i] == ")":
            self.emit("directive", "#", line)  # '#' before a character no name starts with
            return True
        name = "#" + self.word(line).text
        self.out[-1] = Token("directive", name, line)
        if name in _LINE_AFTER:
            end = s.find("\n", self.i)
            end = self.n if end < 0 else end
            self.emit("raw", self._advance(end), line)
        elif name in _RAW_AFTER:
            self.raw_braces()
        return True

    def raw_braces(self) -> None:
        """`#eval [N] { text }`: the braces' text, comments dropped, as one raw token."""
        if not self.skip_space():
            return
        if self.s[self.i] in "0123456789":
            self.number(self.line)
            if not self.skip_space():
                return
        if self.s[self.i] != "{":
            return
        line, s = self.line, self.s
        j, depth, parts, start = self.i + 1, 1, [], self.i + 1
        while j < self.n:
            c = s[j]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    break
            elif c == "/" and s.startswith(("//", "/*"), j):
                parts.append(s[start:j])
                end = s.find("\n", j) if s[j + 1] == "/" else s.find("*/", j + 2)
                j = self.n if end < 0 else (end if s[j + 1] == "/" else end + 2)
                start = j
                continue
            j += 1
        parts.append(s[start:j])
        self._advance(min(j + 1, self.n))
        self.emit("raw", "".join(parts), line)

    def variable(self, line: int) -> bool:
        s = self.s
        self.i += 1
        if not self.skip_space():
            self.emit("bad", "$", line)
            return False
        if s[self.i] == "{":
            kind = "expression" if s.startswith("{{", self.i) else "variable"
            j, depth = self.i + 1, 1
            while j < self.n and depth:
                depth += {"{": 1, "}": -1}.get(s[j], 0)
                j += 1
            if depth:
                self._advance(self.n)
                return False
            text = "$" + self._advance(j)
            self.emit(kind, text, line, self.templates and kind == "expression")
            return True
        match = _VARIABLE.match(s, self.i)
        if not match:
            self.emit("bad", "$", line)
            return True
        start = self.i
        end, depth = match.end(), 0
        for j in range(start, end):
            if s[j] == "(":
                depth += 1
            elif s[j] == ")":
                if depth == 0:
                    end = j
                    break
                depth -= 1
        if end == start:
            self.emit("bad", "$", line)
            return True
        self.emit("variable", "$" + self._advance(end), line)
        return True

    # -- binary data ------------------------------------------------------------------

    def header_end(self) -> None:
        """After the first top-level '}': is it a FoamFile header saying `format binary`?"""
        tokens = self.out
        if len(tokens) < 3 or tokens[0].text != "FoamFile" or not tokens[1].is_punct("{"):
            return
        header = {
            tokens[k].text: tokens[k + 1].text
            for k in range(2, len(tokens) - 2)
            if tokens[k].kind == "word" and tokens[k + 2].is_punct(";")
        }
        if header.get("format") != "binary":
            return
        arch = dict(re.findall(r"(label|scalar)=(\d+)", header.get("arch", "")))
        self.binary = (int(arch.get("label", 32)) // 8, int(arch.get("scalar", 64)) // 8)
        self.list_class = header.get("class")

    def binary_list(self, count: int) -> None:
        """After `N` in a binary file: `N(raw)` or `N{raw}` of a `List<T>`, or a top-level
        list of the header's class: skip the raw bytes by their size."""
        assert self.binary is not None
        previous = self.out[-2] if len(self.out) > 1 else None
        element: str | None = None
        if previous is not None and previous.kind == "word" and previous.text.startswith("List<"):
            element = previous.text[5:-1]  # a list of another type is written as tokens
        elif self.depth == 0 and self.list_class is not None:
            element = _CLASS_LISTS.get(self.list_class)
        if element not in _COMPONENTS or count == 0:
            return
        if not self.skip_space() or self.s[self.i] not in "({":
            return
        opening = self.s[self.i]
        components, unit = _COMPONENTS[element]
        label, scalar = self.binary
        size = {"label": label, "scalar": scalar, "bool": 1}[unit] * components
        size *= count if opening == "(" else 1
        end = self.i + 1 + size
        closing = ")" if opening == "(" else "}"
        tail = _SPACES.match(self.s, end)
        after = tail.end() if tail else end
        if after >= self.n or self.s[after] != closing:
            raise BinaryData(f"line {self.line}: binary data that does not end where it says")
        self.out.append(Token("data", "+0", self.line))
        self.i = end  # OpenFOAM reads raw bytes without counting their lines
        self._advance(after + 1)


def tokenize(
    text: str, *, templates: bool = False, bulk: bool = False, limit: int | None = None
) -> list[Token]:
    """The tokens of a dictionary's `text` (``templates``: ``{{ … }}`` are placeholders of
    the portal's templates; ``bulk``: each long run of numbers and parentheses after a '('
    (a mesh's points, a field's values) is one ``data`` token whose text is the change of
    nesting it makes, so hundreds of megabytes are read at a regular expression's speed).
    Raises BinaryData for binary data that cannot be sized, or past `limit` tokens."""
    return _Lexer(text, templates, bulk, limit).run()


class _NumberLexer(_Lexer):
    """The lexer, noting where each number token starts."""

    def __init__(self, text: str, bulk: bool, limit: int | None) -> None:
        super().__init__(text, False, bulk, limit)
        self.numbers: dict[int, Token] = {}

    def number(self, line: int) -> None:
        start, count = self.i, len(self.out)
        super().number(line)
        self.numbers[start] = self.out[count]


def number_starts(
    text: str, *, bulk: bool = False, limit: int | None = None
) -> tuple[dict[int, Token], bool]:
    """What `tokenize` reads in `text` (no templates) as numbers, by the offset each starts
    at (a number token's text is the characters from there; a lone ``-`` is punctuation),
    and whether the text is in OpenFOAM's binary format (where a count's digits decide
    how many bytes are skipped). Raises as `tokenize` does."""
    lexer = _NumberLexer(text, bulk, limit)
    lexer.run()
    return lexer.numbers, lexer.binary is not None
