"""Text analysis as configuration: the chains of a catalog, generated from its languages.

The catalog profile declares the catalog's languages (``languages: [en, fr]``) and the
analyzer triggers are analysed with (``analyzer``, default ``govsearch_text``).
:func:`catalog_mapping` adds the generated chains to the mapping's ``settings.analysis``;
:func:`policy_analysis` copies the profile's analyzer, with every filter, tokenizer and
character filter it uses, for the policies index, so trigger phrases and intents are
analysed exactly like catalog text (percolation runs on the policies index's own chain).

Generated, per declared language ``xx`` (presets in :data:`PRESETS`, from the engine's
built-in filters):

- ``govsearch_text`` (every language in one chain, for fields holding any of them):
  standard tokenizer, elision (the union of the articles of the languages that have it),
  lowercase, the **stop-word marks** of each language, ASCII folding, then each language's
  light stemmer.
- ``govsearch_text_xx`` (one language, for a ``.xx`` subfield): the language's elision,
  lowercase (and the English possessive), the language's stop words dropped (the engine's
  ``_xx_`` list), the other languages' stop-word marks, ASCII folding, the stemmer of the
  engine's own ``xx`` analyzer.

Stop words keep languages apart. They are applied before folding: a stop word of a
declared language (*the*, *a*, *de*, *été*) becomes a marked token (``_the``, non-ASCII
words punycoded: ``à`` -> ``_xn-0ca``) that no folded word can equal, and that stemmers leave
alone. So French *thé* (folded ``the``) never matches English *the*, and *à* never matches
*a*. In ``govsearch_text`` a stop word is marked, not dropped, so trigger cues made of stop
words (``no``, ``pas de``, ``free of``) and the exact trigger's token count keep working;
the price is that a word that is a stop word in one declared language is matched as typed
(unfolded, unstemmed) in all of them (see docs/catalog.md, ADR 0020).
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

SHARED_ANALYZER = "govsearch_text"
STOPWORDS_DIR = Path(__file__).with_name("stopwords")


@dataclass(frozen=True)
class Preset:
    """What the engine offers for one language."""

    code: str
    name: str
    """the engine's name of the language (``_french_`` stop words, ``french`` analyzer)"""
    stemmer: str
    """the light stemmer of the shared chain (plural and accent forms, little else)"""
    language_stemmer: str
    """the stemmer the engine's own analyzer for the language uses (for ``.xx`` subfields)"""
    elision: tuple[str, ...] = ()
    """articles elided before an apostrophe (``l'orange``), as the engine's analyzer has them"""
    possessive: bool = False


PRESETS: dict[str, Preset] = {
    p.code: p
    for p in (
        Preset("en", "english", "light_english", "english", possessive=True),
        Preset(
            "fr", "french", "light_french", "light_french",
            ("l", "m", "t", "qu", "n", "s", "j", "d", "c", "jusqu", "quoiqu", "lorsqu", "puisqu"),
        ),
        Preset("de", "german", "light_german", "light_german"),
        Preset("es", "spanish", "light_spanish", "light_spanish"),
        Preset(
            "it", "italian", "light_italian", "light_italian",
            ("c", "l", "all", "dall", "dell", "nell", "sull", "coll", "pell", "gl", "agl", "dagl",
             "degl", "negl", "sugl", "un", "m", "t", "s", "v", "d"),
        ),
        Preset("pt", "portuguese", "light_portuguese", "light_portuguese"),
        Preset("nl", "dutch", "dutch", "dutch"),
        Preset("ca", "catalan", "catalan", "catalan", ("d", "l", "m", "n", "s", "t")),
    )
}


class Language(BaseModel):
    """One declared language: a preset code (``fr``), optionally with overrides."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str = Field(pattern=r"^[a-z]{2,3}$")
    stemmer: str | None = None
    """the shared chain's stemmer (an engine ``stemmer`` language); default: the preset's"""
    stopwords: tuple[str, ...] | None = None
    """replaces the engine's list for this language (``[]``: none)"""
    elision: tuple[str, ...] | None = None
    """replaces the preset's elided articles (``[]``: none)"""

    @model_validator(mode="before")
    @classmethod
    def _from_code(cls, value: Any) -> Any:
        return {"code": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _known(self) -> Language:
        if self.code not in PRESETS and (self.stemmer is None or self.stopwords is None):
            known = ", ".join(sorted(PRESETS))
            raise ValueError(
                f"no preset for language {self.code!r} (presets: {known}): give its stemmer and stopwords"
            )
        return self

    @property
    def preset(self) -> Preset:
        return PRESETS.get(self.code) or Preset(self.code, self.code, self.stemmer or "", self.stemmer or "")

    def shared_stemmer(self) -> str:
        return self.stemmer or self.preset.stemmer

    def words(self) -> tuple[str, ...]:
        """The stop words, lowercased (the chains lowercase before they mark)."""
        if self.stopwords is None:
            return engine_stopwords(self.code)
        return tuple(dict.fromkeys(w.strip().lower() for w in self.stopwords if w.strip()))

    def articles(self) -> tuple[str, ...]:
        return self.elision if self.elision is not None else self.preset.elision


@cache
def engine_stopwords(code: str) -> tuple[str, ...]:
    """The engine's built-in stop words for a preset language (shipped copies, checked
    against the engine by the integration tests)."""
    text = (STOPWORDS_DIR / f"{code}.txt").read_text(encoding="utf-8")
    return tuple(w for w in (line.strip() for line in text.splitlines()) if w and not w.startswith("#"))


def mark(word: str) -> str:
    """The marked token of a stop word: ASCII (ASCII folding leaves it as it is), distinct
    for distinct words, never equal to a folded word."""
    return "_" + (word if word.isascii() else "xn-" + word.encode("punycode").decode("ascii"))


def generated_analysis(languages: tuple[Language, ...]) -> dict[str, dict[str, Any]]:
    """The ``settings.analysis`` entries the languages generate (filters and analyzers)."""
    filters: dict[str, Any] = {}
    analyzers: dict[str, Any] = {}
    articles = sorted({a for lang in languages for a in lang.articles()})
    if articles:
        filters["govsearch_elision"] = {"type": "elision", "articles_case": True, "articles": articles}
    for lang in languages:
        code = lang.code
        if lang.words():
            filters[f"govsearch_{code}_stop_marks"] = {
                "type": "stemmer_override",
                "rules": [f"{w} => {mark(w)}" for w in lang.words() if "," not in w and "=>" not in w],
            }
            filters[f"govsearch_{code}_stop"] = (
                {"type": "stop", "stopwords": f"_{lang.preset.name}_"}
                if lang.stopwords is None
                else {"type": "stop", "stopwords": list(lang.words())}
            )
        filters[f"govsearch_{code}_stemmer"] = {"type": "stemmer", "language": lang.shared_stemmer()}
        if lang.preset.language_stemmer != lang.shared_stemmer() and lang.code in PRESETS:
            filters[f"govsearch_{code}_language_stemmer"] = {
                "type": "stemmer", "language": lang.preset.language_stemmer,
            }
        if lang.articles():
            filters[f"govsearch_{code}_elision"] = {
                "type": "elision", "articles_case": True, "articles": list(lang.articles()),
            }
    if any(lang.preset.possessive for lang in languages):
        filters["govsearch_possessive"] = {"type": "stemmer", "language": "possessive_english"}

    marks = [f"govsearch_{lang.code}_stop_marks" for lang in languages if lang.words()]
    analyzers[SHARED_ANALYZER] = {
        "type": "custom",
        "tokenizer": "standard",
        "filter": (["govsearch_elision"] if articles else [])
        + ["lowercase", *marks, "asciifolding"]
        + [f"govsearch_{lang.code}_stemmer" for lang in languages],
    }
    for lang in languages:
        code = lang.code
        stemmer = (
            f"govsearch_{code}_language_stemmer"
            if f"govsearch_{code}_language_stemmer" in filters
            else f"govsearch_{code}_stemmer"
        )
        chain = [f"govsearch_{code}_elision"] if lang.articles() else []
        chain.append("lowercase")
        if lang.preset.possessive:
            chain.append("govsearch_possessive")
        if lang.words():
            chain.append(f"govsearch_{code}_stop")
        chain += [m for m in marks if m != f"govsearch_{code}_stop_marks"]
        chain += ["asciifolding", stemmer]
        analyzers[f"{SHARED_ANALYZER}_{code}"] = {"type": "custom", "tokenizer": "standard", "filter": chain}
    return {"filter": filters, "analyzer": analyzers}


def catalog_mapping(body: dict[str, Any], languages: tuple[Language, ...]) -> dict[str, Any]:
    """The mapping body with the generated analysis added to ``settings.analysis``.

    A name the languages generate must not be defined otherwise by the mapping (ValueError;
    the same definition is fine, so a merged body merges to itself) -- except when the
    profile declares no language: a mapping that defines its own
    ``govsearch_text`` (as mappings did before languages were configuration) keeps it."""
    result = copy.deepcopy(body)
    analysis = result.setdefault("settings", {}).setdefault("analysis", {})
    for kind, entries in generated_analysis(languages).items():
        own = analysis.setdefault(kind, {})
        for name, definition in entries.items():
            if name in own:
                if languages and own[name] != definition:
                    raise ValueError(
                        f"settings.analysis.{kind}.{name} is generated from the profile's languages:"
                        " remove it from the mapping (or name your own analyzer differently)"
                    )
                continue
            own[name] = definition
    return result


#: the engine's built-in analyzers (a field may name one without defining it)
BUILT_IN_ANALYZERS = frozenset({
    "standard", "simple", "whitespace", "stop", "keyword", "pattern", "fingerprint",
    "arabic", "armenian", "basque", "bengali", "brazilian", "bulgarian", "catalan", "cjk",
    "czech", "danish", "dutch", "english", "estonian", "finnish", "french", "galician",
    "german", "greek", "hindi", "hungarian", "indonesian", "irish", "italian", "latvian",
    "lithuanian", "norwegian", "persian", "portuguese", "romanian", "russian", "sorani",
    "spanish", "swedish", "turkish", "thai",
})


def undefined_analyzers(body: dict[str, Any]) -> list[str]:
    """Fields whose ``analyzer`` / ``search_analyzer`` is neither built in nor defined in
    the (merged) mapping's ``settings.analysis``, one problem each."""
    defined = set(body.get("settings", {}).get("analysis", {}).get("analyzer", {})) | BUILT_IN_ANALYZERS
    problems: list[str] = []

    def walk(properties: dict[str, Any], prefix: str) -> None:
        for name, spec in properties.items():
            for key in ("analyzer", "search_analyzer"):
                if key in spec and spec[key] not in defined:
                    problems.append(
                        f"mapping: field {prefix}{name} uses {key} {spec[key]!r}, which is neither"
                        " defined in settings.analysis, generated from the profile's languages, nor built in"
                    )
            walk(spec.get("fields", {}), f"{prefix}{name}.")
            walk(spec.get("properties", {}), f"{prefix}{name}.")

    walk(body.get("mappings", body).get("properties", {}), "")
    return problems


@dataclass(frozen=True)
class PolicyAnalysis:
    """The analysis the policies index gets: one analyzer and what it needs."""

    analyzer: str
    settings: dict[str, Any]
    """a ``settings.analysis`` block holding the analyzer and its components"""

    @property
    def fingerprint(self) -> str:
        canonical = json.dumps({"analyzer": self.analyzer, "analysis": self.settings}, sort_keys=True)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


#: settings.analysis sections an analyzer may name components from
_COMPONENTS = (("tokenizer", "tokenizer"), ("char_filter", "char_filter"), ("filter", "filter"))


def policy_analysis(mapping: dict[str, Any], analyzer: str) -> PolicyAnalysis:
    """``analyzer`` as the (merged) catalog mapping defines it, with the components it
    names that the mapping defines (the others are the engine's built-ins), and the filters
    those name in turn (``condition``'s ``filter``, ``multiplexer``'s ``filters``). A
    built-in analyzer (``english``) needs no definition."""
    analysis = mapping.get("settings", {}).get("analysis", {})
    definitions = analysis.get("analyzer", {})
    if analyzer not in definitions:
        if analyzer in BUILT_IN_ANALYZERS:
            return PolicyAnalysis(analyzer=analyzer, settings={})
        defined = ", ".join(sorted(definitions)) or "none"
        raise ValueError(
            f"analyzer {analyzer!r} is not defined in the mapping's settings.analysis (defined: {defined})"
        )
    definition = definitions[analyzer]
    settings: dict[str, Any] = {"analyzer": {analyzer: copy.deepcopy(definition)}}
    pending: list[tuple[str, Any]] = [(section, definition.get(key, [])) for key, section in _COMPONENTS]
    while pending:
        section, named = pending.pop()
        names = [named] if isinstance(named, str) else named
        for entry in names if isinstance(names, list) else []:
            for name in str(entry).split(","):  # a multiplexer's chain: "lowercase, porter_stem"
                name = name.strip()
                own = analysis.get(section, {})
                if name in own and name not in settings.get(section, {}):
                    settings.setdefault(section, {})[name] = copy.deepcopy(own[name])
                    if section == "filter":
                        pending += [("filter", own[name].get(k, [])) for k in ("filter", "filters")]
    return PolicyAnalysis(analyzer=analyzer, settings=settings)


def policies_mapping(template: dict[str, Any], analysis: PolicyAnalysis) -> dict[str, Any]:
    """The policies index body: ``template`` with the analysis, its ``intent`` field (and
    the field's token count) analysed with the profile's analyzer."""
    body = copy.deepcopy(template)
    body.setdefault("settings", {})["analysis"] = copy.deepcopy(analysis.settings)
    intent = body["mappings"]["properties"]["intent"]
    intent["analyzer"] = analysis.analyzer
    for sub in intent.get("fields", {}).values():
        if "analyzer" in sub or sub.get("type") == "token_count":
            sub["analyzer"] = analysis.analyzer
    return body
