"""Money as configuration: how a catalog's shoppers write amounts, and reading them.

A catalog profile's ``money`` section (:class:`MoneyNotation`) declares the currency and its
notations: symbols and codes (before or after the number), words before the number
("rs."), words after it ("rupees"), the digit grouping (``western`` 1,500,000, ``indian``
15,00,000, or ``none``), the group and decimal separators, and multipliers ("k", "lakh",
"crore"). :func:`parse_amount` reads a captured text with it: an :class:`Amount`, or an
:class:`Unreadable` with the reason. A text that is not exactly one amount in the notation
is never reinterpreted ("5k" without a ``k`` multiplier is not 5, "150,000" in Indian
grouping is not 150000): the price rule is skipped with that reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Grouping = Literal["western", "indian", "none"]


class MoneyNotation(BaseModel):
    """The currency of a catalog's prices and how amounts are written in its market."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    currency: str = Field(pattern=r"^[A-Z]{3}$")
    """ISO 4217 code of the catalog's prices (``INR``); also accepted before or after a number"""
    symbols: tuple[str, ...] = ()
    """signs written before or after the number (``₹``, ``$``)"""
    codes: tuple[str, ...] = ()
    """more codes accepted before or after the number, besides ``currency``"""
    words_before: tuple[str, ...] = ()
    """words written before the number (``rs``, ``rs.``)"""
    words_after: tuple[str, ...] = ()
    """words written after the number (``rupees``, ``euros``)"""
    grouping: Grouping = "western"
    """how digits are grouped: ``western`` (1,500,000), ``indian`` (15,00,000; the last group
    has three digits, the others two) or ``none`` (no group separator accepted)"""
    group_separator: str = Field(default=",", min_length=1, max_length=1)
    decimal_separator: str = Field(default=".", min_length=1, max_length=1)
    multipliers: dict[str, float] = Field(default_factory=dict)
    """words or letters after the number that multiply it (``k: 1000``, ``lakh: 100000``),
    attached ("5k") or separated by a space ("5 lakh")"""

    @field_validator("symbols", "codes", "words_before", "words_after")
    @classmethod
    def _no_blank(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not item.strip() or item != item.strip() for item in value):
            raise ValueError("notations must be non-empty and have no surrounding spaces")
        return value

    @field_validator("multipliers")
    @classmethod
    def _positive(cls, value: dict[str, float]) -> dict[str, float]:
        for word, factor in value.items():
            if not re.fullmatch(r"[^\W\d_]+", word) or factor <= 0:
                raise ValueError(f"multiplier {word!r}: letters only, and a factor above 0")
        return value

    @model_validator(mode="after")
    def _separators_differ(self) -> MoneyNotation:
        if self.group_separator == self.decimal_separator:
            raise ValueError("group_separator and decimal_separator must differ")
        if self.group_separator.isalnum() or self.decimal_separator.isalnum():
            raise ValueError("separators must not be letters or digits")
        return self

    def marks_before(self) -> tuple[str, ...]:
        return self.symbols + self._codes() + self.words_before

    def marks_after(self) -> tuple[str, ...]:
        return self.symbols + self._codes() + self.words_after

    def _codes(self) -> tuple[str, ...]:
        return (self.currency, *self.codes)


@dataclass(frozen=True)
class Amount:
    value: float
    text: str


@dataclass(frozen=True)
class Unreadable:
    text: str
    reason: str
    """why, after the text: ``is not written in INR notation (...)``"""


def parse_amount(text: str, notation: MoneyNotation) -> Amount | Unreadable:
    """``text`` as one amount in ``notation`` (module docstring), or why it is not one."""
    rest = " ".join(text.split()).casefold()
    rest = _strip_mark(rest, notation.marks_before(), before=True)
    rest = _strip_mark(rest, notation.marks_after(), before=False)
    factor = 1.0
    for word, value in sorted(notation.multipliers.items(), key=lambda item: -len(item[0])):
        if rest.endswith(word.casefold()) and rest[: -len(word)].rstrip()[-1:].isdigit():
            rest, factor = rest[: -len(word)].rstrip(), value
            break
    number = _number(rest, notation)
    if number is None:
        return Unreadable(text, _why(text, rest, notation))
    return Amount(round(number * factor, 6), text)


def _strip_mark(text: str, marks: tuple[str, ...], *, before: bool) -> str:
    for mark in sorted((m.casefold() for m in marks), key=len, reverse=True):
        if before and text.startswith(mark):
            stripped = text[len(mark):]
            if mark[-1].isalpha() and stripped[:1].isalpha():
                continue  # "rs" is not the start of "rsvp"
            return stripped.lstrip()
        if not before and text.endswith(mark):
            stripped = text[: -len(mark)]
            if mark[0].isalpha() and stripped[-1:].isalpha():
                continue
            return stripped.rstrip()
    return text


def _number(text: str, notation: MoneyNotation) -> float | None:
    group, decimal = re.escape(notation.group_separator), re.escape(notation.decimal_separator)
    integer = {
        "western": rf"\d{{1,3}}(?:{group}\d{{3}})+|\d+",
        "indian": rf"\d{{1,2}}(?:{group}\d{{2}})*{group}\d{{3}}|\d+",
        "none": r"\d+",
    }[notation.grouping]
    found = re.fullmatch(rf"(?P<integer>{integer})(?:{decimal}(?P<fraction>\d+))?", text)
    if found is None:
        return None
    digits = found["integer"].replace(notation.group_separator, "")
    fraction = found["fraction"]
    return float(f"{digits}.{fraction}" if fraction else digits)


def _why(text: str, rest: str, notation: MoneyNotation) -> str:
    if not re.search(r"\d", rest):
        return "has no number"
    if re.fullmatch(r"[\d.,\s']+", rest):
        example = {"western": "1,500,000", "indian": "15,00,000", "none": "1500000"}[notation.grouping]
        return (
            f"is not written in {notation.currency} notation ({notation.grouping} digit"
            f" grouping, e.g. {example}; decimal separator '{notation.decimal_separator}')"
        )
    return f"is not an amount in {notation.currency} notation (unknown word or sign)"
