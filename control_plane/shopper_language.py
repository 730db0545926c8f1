"""Shopper language at load time: vocabulary triggers and how rules meet text fields.

Two steps of freezing a policy set (:func:`control_plane.loader.load_policy_set` and
``build_policy_set`` call them):

- :func:`shopper_violations` -- cross-checks: a ``vocabulary`` trigger names a vocabulary
  that exists (``unknown_vocabulary``); a rule's ``match`` fits its field's type in the
  catalog mapping (``match_field_type``: ``words`` / ``phrase`` need a text field,
  ``terms`` a keyword one). Field types are known only when the caller passes them (the
  catalog profile names the mapping); without them, only explicit ``match`` values apply;
- :func:`resolved` -- each ``vocabulary`` trigger gets its vocabulary's words as its
  phrases (what the percolator matches), and each filter or exclude rule without
  ``match`` on a text field gets ``match: phrase`` (``terms`` on a text field only
  removes a product when the captured words equal one indexed token: "without peanuts"
  excluded nothing). A set resolved twice is the same set.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Literal

from control_plane.catalog.profile import CatalogProfile, mapping_fields
from control_plane.policy import ExcludeRule, FilterRule, Policy, Rule, Vocabulary

#: mapping types that are analysed text (the ones ``match`` / ``match_phrase`` are for)
TEXT_TYPES = frozenset({"text", "match_only_text", "search_as_you_type"})

FieldTypes = Mapping[str, str]


def field_types_of(profile: CatalogProfile) -> dict[str, str]:
    """Dotted field -> mapping type, from the mapping the catalog profile names."""
    return mapping_fields(profile.load_mapping())


def vocabulary_terms(vocabulary: Vocabulary) -> tuple[str, ...]:
    """Every word of a vocabulary, catalog values included, sorted, each once."""
    words = {w.strip() for value, synonyms in vocabulary.entries.items() for w in (value, *synonyms)}
    return tuple(sorted(w for w in words if w))


def shopper_violations(
    policy: Policy, known_vocabularies: set[str], field_types: FieldTypes | None
) -> Iterator[tuple[str, str, tuple[str | int, ...]]]:
    """(code, message, loc) for each problem of ``policy`` (see the module docstring)."""
    trigger = policy.trigger
    if trigger.kind == "vocabulary" and trigger.vocabulary not in known_vocabularies:
        yield (
            "unknown_vocabulary",
            f"vocabulary {trigger.vocabulary!r} does not exist"
            f" (known: {', '.join(sorted(known_vocabularies)) or 'none'})",
            ("trigger", "vocabulary"),
        )
    if field_types is None:
        return
    for number, rule in enumerate(policy.rules):
        body = rule.body
        if not isinstance(body, FilterRule | ExcludeRule) or body.match is None:
            continue
        kind = field_types.get(body.field)
        if kind is None:
            continue
        text = kind in TEXT_TYPES
        if body.match == "terms" and text:
            yield (
                "match_field_type",
                f"field {body.field!r} is {kind}: 'terms' would only match whole indexed tokens;"
                " use match: phrase or words",
                ("rules", number, rule.kind, "match"),
            )
        elif body.match != "terms" and not text:
            yield (
                "match_field_type",
                f"field {body.field!r} is {kind}, not text: match: {body.match} needs a text"
                " field (use terms)",
                ("rules", number, rule.kind, "match"),
            )


def text_match(field: str, field_types: FieldTypes | None) -> Literal["phrase"] | None:
    if field_types is not None and field_types.get(field) in TEXT_TYPES:
        return "phrase"
    return None


def resolved(
    policies: Sequence[Policy], vocabularies: Sequence[Vocabulary], field_types: FieldTypes | None
) -> list[Policy]:
    """``policies`` with vocabulary triggers' phrases filled in and text-field rules'
    ``match`` chosen from ``field_types`` (module docstring)."""
    terms = {v.name: vocabulary_terms(v) for v in vocabularies}
    out: list[Policy] = []
    for policy in policies:
        update: dict[str, object] = {}
        trigger = policy.trigger
        if trigger.kind == "vocabulary" and trigger.vocabulary in terms:
            words = terms[trigger.vocabulary or ""]
            if trigger.values != words:
                update["trigger"] = trigger.model_copy(update={"values": words})
        rules = []
        for rule in policy.rules:
            body = rule.body
            if isinstance(body, FilterRule | ExcludeRule) and body.match is None:
                match = text_match(body.field, field_types)
                if match is not None:
                    rule = Rule(kind=rule.kind, body=body.model_copy(update={"match": match}))
            rules.append(rule)
        if tuple(rules) != policy.rules:
            update["rules"] = tuple(rules)
        out.append(policy.model_copy(update=update) if update else policy)
    return out
