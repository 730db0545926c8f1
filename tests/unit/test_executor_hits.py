"""A hit's policies, from the clause names the engine reports it matched (the executor's
``_hit``; the names' parse is kept per distinct set of names, ADR 0033)."""

from __future__ import annotations

from control_plane.executor import _hit, _policies_of


def test_a_hits_policies_and_sponsors_from_its_matched_clause_names() -> None:
    raw = {
        "_id": 7, "_score": 1.5, "_source": {"title": "x"},
        "matched_queries": ["boost:vegan#2", "guard:in-stock-only", "sponsored:acme", "boost:vegan",
                            "not-a-clause", "nonsense:kind"],
    }
    hit = _hit(raw)
    assert hit.id == "7" and hit.score == 1.5 and hit.source == {"title": "x"}
    assert hit.policies == ("acme", "in-stock-only", "vegan")
    assert hit.sponsored_by == ("acme",)


def test_the_same_names_give_the_same_policies_each_time_and_other_names_their_own() -> None:
    names = {"boost:vegan": 1.0, "sponsored:acme": 2.0}  # Elasticsearch 8.8+: {name: score}
    first = _hit({"_id": "a", "matched_queries": names})
    again = _hit({"_id": "b", "matched_queries": list(names)})
    other = _hit({"_id": "c", "matched_queries": ["boost:organic"]})
    none = _hit({"_id": "d"})
    assert (first.policies, first.sponsored_by) == (again.policies, again.sponsored_by) == (
        ("acme", "vegan"), ("acme",)
    )
    assert (other.policies, other.sponsored_by) == (("organic",), ())
    assert (none.policies, none.sponsored_by) == ((), ())
    assert _policies_of.cache_info().hits >= 1  # the repeated set was parsed once
