"""The catalog profile: which index field plays which role.

Everything in ``control_plane`` that must name a catalog field (the renderer's full-text
query and title boost, guards, facets, category constraints, economics, hit display)
reads it from a :class:`CatalogProfile`, never from a literal. A different catalog means
a different profile and mapping, not different code.

Field names may be dotted subfields (``title.en``, ``brand.text``). :func:`load_profile`
resolves ``mapping`` relative to the profile file and checks every field against the
mapping: it must exist and have a type fit for its role.
"""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from control_plane import yaml_aliases
from control_plane.catalog.analysis import (
    SHARED_ANALYZER,
    Language,
    PolicyAnalysis,
    catalog_mapping,
    policy_analysis,
    undefined_analyzers,
)
from control_plane.money import MoneyNotation

FieldName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")]

NUMERIC_TYPES = frozenset({
    "float", "double", "half_float", "scaled_float", "integer", "long", "short", "byte",
    "unsigned_long",
})
#: Mapping types each role accepts.
ROLE_TYPES: dict[str, frozenset[str]] = {
    "id": frozenset({"keyword"}),
    "title": frozenset({"text"}),
    "title_phrase": frozenset({"text"}),
    "fulltext": frozenset({"text"}),
    "price": NUMERIC_TYPES,
    "category": frozenset({"keyword"}),
    "category_leaf": frozenset({"keyword"}),
    "brand": frozenset({"keyword"}),
    "margin": NUMERIC_TYPES,
    "popularity": NUMERIC_TYPES,
    "availability": frozenset({"boolean"}),
    "visibility": frozenset({"boolean"}),
    "market": frozenset({"keyword"}),
    "language": frozenset({"keyword"}),
    "facets.category": frozenset({"keyword"}),
    "facets.brand": frozenset({"keyword"}),
}

#: Roles a catalog may lack, and what it does without them (``govsearch policy lint`` says so).
OPTIONAL_ROLES: dict[str, str] = {
    "category_leaf": "the most specific category of a product is not known",
    "margin": "no margin signal: economics ignores margin weights",
    "popularity": "no popularity signal: economics ignores popularity weights",
    "availability": "no in-stock guard is possible",
    "visibility": "no visible-only guard is possible",
    "market": "no market guard is possible",
    "language": "products carry no language",
}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class WeightedField(_Frozen):
    field: FieldName
    weight: float = Field(gt=0, le=100)


class Facets(_Frozen):
    category: FieldName
    brand: FieldName
    price_ranges: tuple[float, ...] = Field(min_length=2)
    """range edges: [0, 2, 5] gives the buckets 0-2, 2-5 and 5 and above"""

    @field_validator("price_ranges")
    @classmethod
    def _increasing(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if value[0] < 0 or any(b <= a for a, b in pairwise(value)):
            raise ValueError("price_ranges must be non-negative and strictly increasing")
        return value


class CatalogProfile(_Frozen):
    """Roles of the catalog's fields, and where its index mapping lives."""

    name: str = Field(min_length=1)
    alias: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    mapping: Path
    """the index settings and mappings JSON (absolute once loaded)"""
    id: FieldName
    title: FieldName
    title_phrase: FieldName
    fulltext: tuple[WeightedField, ...] = Field(min_length=1)
    price: FieldName
    category: FieldName
    """the full category path, general to specific (category constraints, statistics)"""
    category_leaf: FieldName | None = None
    """optional: the most specific category"""
    brand: FieldName
    margin: FieldName | None = None
    """optional: without it, economics has no margin signal"""
    popularity: FieldName | None = None
    """optional: without it, economics has no popularity signal"""
    margin_scale: float = Field(default=1.0, gt=0)
    """the margin value that counts as 'full' (economics divides by it)"""
    popularity_scale: float = Field(default=1.0, gt=0)
    """the popularity value that counts as 'full' (e.g. 1000 for a 0..1000 field)"""
    availability: FieldName | None = None
    """optional: the in-stock flag (a guard policy filters on it)"""
    visibility: FieldName | None = None
    """optional: the published flag (a guard policy filters on it)"""
    market: FieldName | None = None
    """optional: the market code (the market guard filters on it)"""
    language: FieldName | None = None
    facets: Facets
    display: tuple[FieldName, ...] = Field(min_length=1)
    """the fields returned in each hit"""
    money: MoneyNotation | None = None
    """the currency of ``price`` and how shoppers write amounts (None: the built-in notation,
    $ € £ ¥ and their words, either decimal separator)"""
    languages: tuple[Language, ...] = ()
    """the catalog's languages: the mapping's and the policies index's analysis chains are
    generated from them (:mod:`control_plane.catalog.analysis`); none: language-neutral"""
    analyzer: str = SHARED_ANALYZER
    """the analyzer triggers and intents are analysed with (generated or the mapping's own);
    the policies index gets a copy of its definition"""

    @field_validator("fulltext")
    @classmethod
    def _distinct_fulltext(cls, value: tuple[WeightedField, ...]) -> tuple[WeightedField, ...]:
        fields = [f.field for f in value]
        if len(set(fields)) != len(fields):
            raise ValueError("a fulltext field is listed twice")
        return value

    @field_validator("display")
    @classmethod
    def _distinct_display(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError("a display field is listed twice")
        return value

    def absent_roles(self) -> list[tuple[str, str]]:
        """(role, what is missing without it) for each optional role the profile leaves out."""
        return [(role, OPTIONAL_ROLES[role]) for role in OPTIONAL_ROLES if getattr(self, role) is None]

    @field_validator("languages")
    @classmethod
    def _distinct_languages(cls, value: tuple[Language, ...]) -> tuple[Language, ...]:
        codes = [lang.code for lang in value]
        if len(set(codes)) != len(codes):
            raise ValueError("a language is listed twice")
        return value

    def load_mapping(self) -> dict[str, Any]:
        """The ``indices.create`` body: ``{"settings": ..., "mappings": ...}``, with the
        analysis generated from :attr:`languages` added to ``settings.analysis``."""
        body: dict[str, Any] = json.loads(self.mapping.read_text(encoding="utf-8"))
        return catalog_mapping(body, self.languages)

    def policy_analysis(self) -> PolicyAnalysis:
        """The analysis the policies index gets: :attr:`analyzer` and its components."""
        return policy_analysis(self.load_mapping(), self.analyzer)

    def field_roles(self) -> list[tuple[str, str]]:
        """(role, field) for every field the profile names, in declaration order."""
        roles: list[tuple[str, str]] = []
        for role in ("id", "title", "title_phrase"):
            roles.append((role, getattr(self, role)))
        roles.extend((f"fulltext.{i}", f.field) for i, f in enumerate(self.fulltext))
        for role in (
            "price", "category", "category_leaf", "brand", "margin", "popularity",
            "availability", "visibility", "market", "language",
        ):
            value = getattr(self, role)
            if value is not None:
                roles.append((role, value))
        roles.append(("facets.category", self.facets.category))
        roles.append(("facets.brand", self.facets.brand))
        roles.extend((f"display.{i}", name) for i, name in enumerate(self.display))
        return roles

    def check_mapping(self, mapping: dict[str, Any] | None = None) -> list[str]:
        """Problems between the profile and a mapping body (empty when they agree)."""
        body = mapping if mapping is not None else self.load_mapping()
        types = mapping_fields(body)
        problems: list[str] = []
        try:
            merged = catalog_mapping(body, self.languages)
            policy_analysis(merged, self.analyzer)
            problems.extend(undefined_analyzers(merged))
        except ValueError as exc:
            problems.append(f"analysis: {exc}")
        for role, field in self.field_roles():
            if field not in types:
                problems.append(f"{role}: field {field!r} is not in the mapping")
                continue
            allowed = ROLE_TYPES.get(role.split(".")[0] if role.startswith("fulltext") else role)
            if allowed is not None and types[field] not in allowed:
                expected = "/".join(sorted(allowed))
                problems.append(f"{role}: field {field!r} is {types[field]}, expected {expected}")
            if role.startswith("display.") and "." in field:
                problems.append(f"{role}: display fields must be top-level source fields")
        return problems


def mapping_fields(body: dict[str, Any]) -> dict[str, str]:
    """Dotted field name -> mapping type, subfields (``fields``) and objects included."""
    mappings = body.get("mappings", body)
    found: dict[str, str] = {}

    def walk(properties: dict[str, Any], prefix: str) -> None:
        for name, spec in properties.items():
            path = f"{prefix}{name}"
            found[path] = spec.get("type", "object")
            for sub, sub_spec in spec.get("fields", {}).items():
                found[f"{path}.{sub}"] = sub_spec.get("type", "object")
            if "properties" in spec:
                walk(spec["properties"], f"{path}.")

    walk(mappings.get("properties", {}), "")
    return found


class CatalogProfileError(ValueError):
    """Every problem found in a profile file, one line each."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"invalid catalog profile {source}:\n  " + "\n  ".join(problems))


def load_profile(path: Path | str, *, check: bool = True) -> CatalogProfile:
    """Read and validate a profile; with ``check``, also check it against its mapping."""
    path = Path(path)
    try:
        raw: Any = yaml_aliases.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise CatalogProfileError(str(path), [str(exc)]) from exc
    if not isinstance(raw, dict):
        raise CatalogProfileError(str(path), ["expected a mapping of roles to fields"])
    if isinstance(raw.get("mapping"), str):
        raw["mapping"] = str((path.parent / raw["mapping"]).resolve())
    try:
        profile = CatalogProfile.model_validate(raw)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in e['loc']) or '(profile)'}: {e['msg']}" for e in exc.errors()
        ]
        raise CatalogProfileError(str(path), problems) from exc
    if not profile.mapping.is_file():
        raise CatalogProfileError(str(path), [f"mapping: file not found: {profile.mapping}"])
    if check:
        try:
            problems = profile.check_mapping()
        except (OSError, ValueError) as exc:
            problems = [f"mapping: {exc}"]
        if problems:
            raise CatalogProfileError(str(path), problems)
    return profile
