"""Structural properties of the rendered DSL, over every golden case."""

from __future__ import annotations

import math
from typing import Any

import pytest

from control_plane.plan import Boost, Constraint, Plan, Sponsored, Weight
from control_plane.renderer import CLAUSE_KINDS, FUZZY_MAX_CHARS, PIN_STEP, parse_clause_name, render
from tests.renderer.cases import CASES, PROFILE
from tests.renderer.dsl import names, nodes, replace

ENGINES = ("opensearch", "elasticsearch")
TIERS = ("strict", "relaxed", "broad")
UNATTRIBUTED = {"fulltext_match", "fulltext_synonym", "title_phrase_match", "hide"}


def body(plan: Plan, **args: Any) -> dict[str, Any]:
    args.setdefault("engine", "opensearch")
    args.setdefault("tier", "strict")
    result: dict[str, Any] = render(plan, PROFILE, **args)
    return result


def case(name: str, **overrides: Any) -> dict[str, Any]:
    plan, args = CASES[name]
    return body(plan, **{**args, **overrides})


def scored(query: dict[str, Any]) -> dict[str, Any]:
    """The query under the constraint envelope."""
    (inner,) = query["bool"]["must"]
    assert isinstance(inner, dict)
    return inner


def base(query: dict[str, Any]) -> dict[str, Any]:
    """The base query: below the envelope and every scoring layer."""
    node = scored(query)
    while True:
        if "function_score" in node:
            node = node["function_score"]["query"]
        elif "pinned" in node:
            node = node["pinned"]["organic"]
        elif "minimum_should_match" in node.get("bool", {}) and "must" not in node["bool"]:
            node = node["bool"]["should"][-1]
        else:
            return node


# --- the constraint envelope -------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CASES))
def test_constraints_identical_across_tiers_and_engines(name: str) -> None:
    rendered = [case(name, tier=t, engine=e) for t in TIERS for e in ENGINES]
    for other in rendered[1:]:
        assert other["query"]["bool"]["filter"] == rendered[0]["query"]["bool"]["filter"]
        assert other["query"]["bool"]["must_not"] == rendered[0]["query"]["bool"]["must_not"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_tiers_change_only_the_text_clauses(name: str, engine: str) -> None:
    strict, relaxed, broad = (case(name, tier=t, engine=engine) for t in TIERS)
    assert replace(relaxed, "multi_match", "TEXT") == replace(strict, "multi_match", "TEXT")
    assert replace(broad, "multi_match", "TEXT") == replace(strict, "multi_match", "TEXT")


def test_tier_settings() -> None:
    def text_clauses(tier: str) -> list[dict[str, Any]]:
        return [
            n["multi_match"]
            for _, n in nodes(case("cheap_chocolate", tier=tier))
            if "multi_match" in n
        ]

    (strict,) = text_clauses("strict")
    (relaxed,) = text_clauses("relaxed")
    (broad,) = text_clauses("broad")
    assert strict["operator"] == "and" and "minimum_should_match" not in strict
    assert relaxed["operator"] == "or" and relaxed["minimum_should_match"] == "60%"
    assert broad["operator"] == "or" and broad["fuzziness"] == "AUTO"
    assert "fuzziness" not in strict and "fuzziness" not in relaxed


@pytest.mark.parametrize("extra", [0, 1])
def test_the_broad_tier_forgives_typos_in_a_short_text_only(extra: int) -> None:
    """The engine builds an automaton per fuzzy term and field: a 512-character intent of
    made-up words cost it 0.2-0.3 s in the broad tier, against 1-2 ms for a search. Past
    FUZZY_MAX_CHARS the broad tier matches any term as written; the other tiers, the
    synonyms' own clauses and everything else are unchanged."""
    plan, args = CASES["cheap_chocolate"]
    text = ("dark chocolate " * 10)[: FUZZY_MAX_CHARS + extra - 1] + "s"
    long_plan = plan.model_copy(update={"residual": text, "synonyms": ("bitter chocolate",)})
    rendered = {tier: body(long_plan, **{**args, "tier": tier}) for tier in TIERS}
    broad = [n["multi_match"] for _, n in nodes(rendered["broad"]) if "multi_match" in n]
    residual, synonym = sorted(broad, key=lambda clause: len(clause["query"]), reverse=True)
    assert len(residual["query"]) == FUZZY_MAX_CHARS + extra
    assert ("fuzziness" in residual) is (extra == 0)
    assert synonym["fuzziness"] == "AUTO" and synonym["prefix_length"] == 1  # its own text is short
    assert residual["type"] == "best_fields" and residual["operator"] == "or"
    assert replace(rendered["broad"], "multi_match", "T") == replace(rendered["strict"], "multi_match", "T")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_hard_constraints_live_only_in_the_envelope(name: str, engine: str) -> None:
    """Every filter and exclusion is at query.bool.filter / must_not, nowhere else, and
    the envelope's only other part is the one scored query: no pin, personalization or
    boost can reach a product the constraints remove."""
    query = case(name, engine=engine)["query"]
    assert set(query["bool"]) == {"filter", "must_not", "must"}
    assert len(query["bool"]["must"]) == 1
    envelope_names = {n for _, n in names({"x": query["bool"]["filter"]})}
    envelope_names |= {n for _, n in names({"x": query["bool"]["must_not"]})}
    inner = {n for _, n in names(scored(query))}
    hard = {"guard", "guard_exclude", "filter", "category", "price", "exclude"}
    for name_ in inner:
        parsed = parse_clause_name(name_)
        assert parsed is None or parsed.kind not in hard, f"{name_} below the envelope"
    assert "hide" not in inner
    for _, node in nodes(scored(query)):
        assert "must_not" not in node.get("bool", {}), "a must_not below the envelope"
        assert "filter" not in node.get("bool", {}), "a bool filter below the envelope"
    plan, _ = CASES[name]
    expected = len(plan.guards) + len(plan.filters) + (plan.category is not None)
    expected += (plan.price.min is not None) + (plan.price.max is not None)
    assert len(query["bool"]["filter"]) == expected
    expected_not = len(plan.guard_exclusions) + len(plan.exclusions) + bool(plan.hides)
    assert len(query["bool"]["must_not"]) == expected_not
    assert len(envelope_names) == expected + expected_not


# --- clause names ------------------------------------------------------------------------


def attributions(plan: Plan) -> list[tuple[str, str]]:
    """(kind, policy) of every clause the plan's policies add, in rendering order."""
    found = [("guard", c.policies[0]) for c in plan.guards]
    found += [("filter", c.policies[0]) for c in plan.filters]
    found += [("category", plan.category.policies[0])] if plan.category else []
    found += [("price", b.policy) for b in (plan.price.min, plan.price.max) if b is not None]
    found += [("guard_exclude", c.policies[0]) for c in plan.guard_exclusions]
    found += [("exclude", c.policies[0]) for c in plan.exclusions]
    found += [("boost" if b.weight >= 1 else "bury", b.policy) for b in plan.boosts]
    found += [("sponsored", s.policy) for s in plan.sponsored]
    return found


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_policy_clause_is_named_after_its_policy(name: str, engine: str) -> None:
    plan, _ = CASES[name]
    rendered = names(case(name, engine=engine))
    all_names = [n for _, n in rendered]
    assert len(all_names) == len(set(all_names)), "clause names must be unique per request"
    policy_clauses = []
    for _, name_ in rendered:
        parsed = parse_clause_name(name_)
        if parsed is None:
            assert name_.partition("#")[0] in UNATTRIBUTED
        else:
            assert parsed.kind in CLAUSE_KINDS
            policy_clauses.append((parsed.kind, parsed.policy))
    assert sorted(policy_clauses) == sorted(attributions(plan))


def test_constraint_from_several_policies_is_named_after_the_first() -> None:
    query = case("christmas_chocolate_vegan")["query"]
    category = [c for c in query["bool"]["filter"] if "categories" in c.get("terms", {})]
    assert category[0]["terms"]["_name"] == "category:christmas-chocolate"


def test_repeated_names_get_a_suffix_and_parse_back() -> None:
    plan = Plan(
        residual="biscuits",
        boosts=(
            Boost(field="labels", values=("en:organic",), weight=2.0, policy="organic"),
            Boost(field="brand", values=("Lu",), weight=1.5, policy="organic"),
        ),
    )
    found = [n for _, n in names(body(plan))]
    assert "boost:organic" in found and "boost:organic#2" in found
    assert parse_clause_name("boost:organic#2") == ("boost", "organic")
    assert parse_clause_name("fulltext_match") is None
    assert parse_clause_name("unknown:organic") is None


def test_sponsored_ids_carry_the_sponsoring_policy() -> None:
    sponsored = [
        f
        for _, n in nodes(case("boosts_and_bury"))
        for f in n.get("function_score", {}).get("functions", [])
        if "ids" in f.get("filter", {})
    ]
    assert sponsored == [
        {
            "filter": {"ids": {"values": ["3017620422003"], "_name": "sponsored:sponsor-nutella"}},
            "weight": 1.2,
        }
    ]


# --- base query ----------------------------------------------------------------------------


def test_empty_residual_and_browse_are_match_all_inside_the_constraints() -> None:
    for name in ("empty_residual", "clearance_browse"):
        assert base(case(name)["query"]) == {"match_all": {}}
    assert scored(case("clearance_browse")["query"]) == {"match_all": {}}
    assert base(body(Plan(residual="  \t "))["query"]) == {"match_all": {}}


def test_title_route_searches_title_fields_only() -> None:
    for _, node in nodes(case("title_route_with_synonyms")):
        if "multi_match" in node:
            fields = node["multi_match"]["fields"]
            assert fields == ["title^3.0", "title.en^1.0", "title.fr^1.0"]


def test_synonyms_are_alternatives_of_the_residual() -> None:
    plan = Plan(residual="nutela", synonyms=("nutella", "pate a tartiner"))
    text = base(body(plan)["query"])
    (alternatives,) = text["bool"]["must"]
    texts = [
        (m["multi_match"]["_name"], m["multi_match"]["query"])
        for m in alternatives["bool"]["should"]
    ]
    assert texts == [
        ("fulltext_match", "nutela"),
        ("fulltext_synonym", "nutella"),
        ("fulltext_synonym#2", "pate a tartiner"),
    ]
    assert alternatives["bool"]["minimum_should_match"] == 1
    assert text["bool"]["should"][0]["match_phrase"]["title"]["_name"] == "title_phrase_match"


# --- economics -----------------------------------------------------------------------------


def economics(rendered: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        n["function_score"]
        for _, n in nodes(rendered)
        if any("field_value_factor" in f for f in n.get("function_score", {}).get("functions", []))
    ]


def test_default_economics_weights_are_one() -> None:
    (layer,) = economics(body(Plan(residual="chocolate")))
    assert layer["score_mode"] == "sum" and layer["boost_mode"] == "multiply"
    assert layer["functions"][0] == {"weight": 1}
    factors = {
        f["field_value_factor"]["field"]: f["field_value_factor"] for f in layer["functions"][1:]
    }
    assert factors["margin"]["factor"] == 1.0 and factors["popularity"]["factor"] == 1.0
    for factor in factors.values():
        assert factor["modifier"] == "ln1p" and factor["missing"] == 0


def test_weight_zero_removes_the_signal() -> None:
    (layer,) = economics(case("baby_formula"))
    fields = [f["field_value_factor"]["field"] for f in layer["functions"][1:]]
    assert fields == ["popularity"]
    assert economics(case("clearance_browse")) == []
    plan = Plan(residual="x", margin_weight=Weight(value=0.0), popularity_weight=Weight(value=0))
    assert "function_score" not in scored(body(plan)["query"])


# --- personalization -----------------------------------------------------------------------


def test_personalization_is_the_outermost_scoring_layer() -> None:
    outer = scored(case("personalization")["query"])["function_score"]
    assert outer["score_mode"] == "max" and outer["boost_mode"] == "multiply"
    assert outer["functions"] == [
        {"filter": {"ids": {"values": ["p-123"]}}, "weight": 1.8},
        {"filter": {"ids": {"values": ["p-777"]}}, "weight": 4.5},
    ]
    assert "field_value_factor" in str(outer["query"])


def test_personalization_omitted_when_empty_and_deduplicated() -> None:
    plan = Plan(residual="oranges")
    assert body(plan) == body(plan, personalization=())
    history = [("p-1", 1.5), ("p-1", 3.0), ("p-0", 2.0)]
    functions = scored(body(plan, personalization=history)["query"])["function_score"]["functions"]
    assert [(f["filter"]["ids"]["values"], f["weight"]) for f in functions] == [
        (["p-0"], 2.0),
        (["p-1"], 3.0),
    ]


# --- pins ----------------------------------------------------------------------------------


def test_elasticsearch_pins_use_pinned_inside_the_envelope() -> None:
    query = case("pins_and_hides_elasticsearch")["query"]
    pinned = scored(query)["pinned"]
    assert pinned["ids"] == ["p-003", "p-002"]  # p-001 is hidden: hide beats pin
    assert base(query)["bool"]["must"][0]["multi_match"]["query"] == "pate a tartiner"
    assert "function_score" in pinned["organic"]
    assert query["bool"]["must_not"][-1] == {"ids": {"values": ["p-001", "p-009"], "_name": "hide"}}


def test_opensearch_pins_are_ordered_constant_scores_inside_the_envelope() -> None:
    query = case("pins_and_hides_opensearch")["query"]
    pins = scored(query)["bool"]
    assert pins["minimum_should_match"] == 1
    *clauses, organic = pins["should"]
    assert [
        (c["constant_score"]["filter"]["ids"]["values"], c["constant_score"]["boost"])
        for c in clauses
    ] == [(["p-003"], 2 * PIN_STEP), (["p-002"], PIN_STEP)]
    assert "function_score" in organic
    assert base(query)["bool"]["must"][0]["multi_match"]["query"] == "pate a tartiner"
    assert query["bool"]["must_not"][0]["terms"]["_name"] == "exclude:no-nuts"


def test_pins_that_are_all_hidden_render_no_pin_layer() -> None:
    plan = Plan(residual="x", pins=("a",), hides=("a",))
    for engine in ENGINES:
        inner = scored(body(plan, engine=engine)["query"])
        assert "pinned" not in inner and "bool" not in inner


# --- request envelope ----------------------------------------------------------------------


def test_pagination_source_and_facets() -> None:
    rendered = case("personalization")
    assert (rendered["from"], rendered["size"]) == (5, 5)
    assert rendered["track_total_hits"] is True
    assert rendered["_source"] == list(PROFILE.display)
    assert set(rendered["aggs"]) == {"category", "brand", "price"}
    assert rendered["aggs"]["category"]["terms"]["field"] == PROFILE.facets.category
    assert rendered["aggs"]["brand"]["terms"]["field"] == PROFILE.facets.brand
    ranges = rendered["aggs"]["price"]["range"]["ranges"]
    assert ranges == [
        {"from": 0.0, "to": 2.0},
        {"from": 2.0, "to": 5.0},
        {"from": 5.0, "to": 10.0},
        {"from": 10.0, "to": 20.0},
        {"from": 20.0},
    ]
    assert "aggs" not in case("baby_formula")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"engine": "solr"}, "unknown engine"),
        ({"tier": "loose"}, "unknown tier"),
        ({"page": 0}, "page must be"),
        ({"size": -1}, "page must be"),
        ({"page": 1001, "size": 10}, "hit window"),
        ({"personalization": [("p", math.nan)]}, "personalization weight"),
        ({"personalization": [("p", 0.0)]}, "personalization weight"),
    ],
)
def test_invalid_arguments_are_refused(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        body(Plan(residual="x"), **args)


def test_non_finite_plan_numbers_are_refused() -> None:
    bad = [
        Plan(residual="x", boosts=(Boost(field="f", values=("v",), weight=math.inf, policy="p"),)),
        Plan(residual="x", sponsored=(Sponsored(ids=("i",), weight=math.nan, policy="p"),)),
        Plan(residual="x", margin_weight=Weight(value=math.nan)),
        Plan.model_validate(
            {"residual": "x", "price": {"max": {"value": math.inf, "policy": "p"}}}
        ),
    ]
    for plan in bad:
        with pytest.raises(ValueError):
            body(plan)


def test_guard_exclusions_come_first_in_must_not() -> None:
    plan = Plan(
        residual="x",
        exclusions=(Constraint(field="allergens", values=("en:milk",), policies=("no-milk",)),),
        guard_exclusions=(Constraint(field="blocked", values=(True,), policies=("g",)),),
    )
    must_not = body(plan)["query"]["bool"]["must_not"]
    assert [c["terms"]["_name"] for c in must_not] == ["guard_exclude:g", "exclude:no-milk"]
