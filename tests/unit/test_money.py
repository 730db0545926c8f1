"""Amounts in a catalog's notation (control_plane.money): USD, EUR, GBP and INR."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from control_plane.composer_captures import read_price
from control_plane.money import Amount, MoneyNotation, Unreadable, parse_amount

USD = MoneyNotation(currency="USD", symbols=("$",), words_after=("dollars", "dollar", "bucks"),
                    multipliers={"k": 1000})
EUR = MoneyNotation(currency="EUR", symbols=("€",), words_after=("euros", "euro"),
                    group_separator=".", decimal_separator=",", multipliers={"k": 1000})
GBP = MoneyNotation(currency="GBP", symbols=("£",), words_after=("pounds", "pound", "quid"),
                    multipliers={"k": 1000})
INR = MoneyNotation(
    currency="INR", symbols=("₹",), codes=("RS",), words_before=("rs.", "rs"),
    words_after=("rupees", "rupee", "rs"), grouping="indian",
    multipliers={"k": 1000, "lakh": 100_000, "lakhs": 100_000, "crore": 10_000_000},
)


def value(text: str, notation: MoneyNotation) -> float:
    amount = parse_amount(text, notation)
    assert isinstance(amount, Amount), amount
    return amount.value


@pytest.mark.parametrize(("text", "expected"), [
    ("$5", 5), ("5$", 5), ("5", 5), ("5 dollars", 5), ("USD 12.50", 12.5), ("1,500", 1500),
    ("$1,500,000.25", 1_500_000.25), ("5k", 5000), ("5K", 5000), ("$2.5k", 2500), ("20 bucks", 20),
])
def test_usd(text: str, expected: float) -> None:
    assert value(text, USD) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("5€", 5), ("€ 5", 5), ("12,50 euros", 12.5), ("1.000", 1000), ("1.000,50 €", 1000.5),
    ("EUR 3", 3), ("5k€", 5000), ("5 k", 5000),
])
def test_eur(text: str, expected: float) -> None:
    assert value(text, EUR) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("£5", 5), ("5 pounds", 5), ("GBP 7.99", 7.99), ("£1,250", 1250), ("10 quid", 10), ("£3k", 3000),
])
def test_gbp(text: str, expected: float) -> None:
    assert value(text, GBP) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("₹500", 500), ("500₹", 500), ("rs. 500", 500), ("Rs 500", 500), ("Rs.500", 500),
    ("500 rupees", 500), ("INR 2,000", 2000), ("1,50,000", 150_000), ("₹15,00,000", 1_500_000),
    ("5k", 5000), ("5 lakh", 500_000), ("1.5 lakh", 150_000), ("₹2 crore", 20_000_000),
    ("3 lakhs rupees", 300_000), ("999.50", 999.5),
])
def test_inr(text: str, expected: float) -> None:
    assert value(text, INR) == expected


@pytest.mark.parametrize(("text", "notation", "why"), [
    ("150,000", INR, "indian digit grouping"),     # western grouping in an Indian market
    ("1,50,000", USD, "western digit grouping"),   # Indian grouping in a western one
    ("5 lakh", USD, "unknown word or sign"),        # no lakh multiplier declared
    ("5m", USD, "unknown word or sign"),
    ("500 g", INR, "unknown word or sign"),         # a weight, not an amount
    ("€5", INR, "unknown word or sign"),            # another currency's sign
    ("rupees", INR, "has no number"),
    ("1.5.0", EUR, "EUR notation"),
    ("1,5", USD, "decimal separator '.'"),
])
def test_what_is_not_an_amount_is_refused_with_a_reason(text: str, notation: MoneyNotation, why: str) -> None:
    result = parse_amount(text, notation)
    assert isinstance(result, Unreadable)
    assert why in result.reason and result.text == text


def test_5k_is_never_read_as_5() -> None:
    assert value("5k", USD) == 5000
    no_k = USD.model_copy(update={"multipliers": {}})
    assert isinstance(parse_amount("5k", no_k), Unreadable)
    assert read_price("5k", None) == (None, "is not a price")  # the built-in notation


def test_a_mark_must_be_a_whole_word() -> None:
    assert isinstance(parse_amount("rsvp 5", INR), Unreadable)


def test_the_captures_read_the_catalog_notation_or_the_built_in_one() -> None:
    assert read_price("1,50,000", INR) == (150_000, "")
    assert read_price("5,50", None) == (5.5, "")
    number, why = read_price("1,50,000", USD)
    assert number is None and "western digit grouping" in why


@pytest.mark.parametrize("bad", [
    {"currency": "inr"},
    {"currency": "INR", "group_separator": ".", "decimal_separator": "."},
    {"currency": "INR", "multipliers": {"k": 0}},
    {"currency": "INR", "multipliers": {"5k": 1000}},
    {"currency": "INR", "symbols": [" ₹"]},
    {"currency": "INR", "grouping": "chinese"},
])
def test_bad_notations_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        MoneyNotation.model_validate(bad)
