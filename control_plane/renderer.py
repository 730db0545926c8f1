"""Render a plan into one search request body, through Jinja2 templates.

``render(plan, profile, engine=..., tier=...)`` is pure: no engine client, no clock, no
randomness, no I/O beyond loading the templates once. The same arguments always give the
same dict, hence the same ``json.dumps(sort_keys=True)``.

The query, outermost first::

    bool                                   constraint envelope (constraints.json.j2)
      filter:   guards, policy filters, category, price floor, price ceiling
      must_not: guard exclusions, policy exclusions, hidden ids
      must:     pins                       5 pinned_<engine>.json.j2        (if any pin)
                  personalization          4 personalization.json.j2        (if history)
                    economics              3 economics.json.j2              (unless both 0)
                      governance scores    2 governance_score.json.j2       (if boosts)
                        base query         1 base_query.json.j2

Layers 1 to 4 are DESIGN section 7's, inner to outer. The hard constraints (the filter
and must_not halves of governance) sit in one envelope *around* everything that scores,
rather than inside it, for two reasons. Elasticsearch's ``pinned`` query returns its ids
whether or not they match its organic query, so constraints nested under it would be
bypassed by a pin; and with a single envelope the constraints exist exactly once, at a
fixed path (``query.bool.filter`` / ``query.bool.must_not``), byte-identical across tiers,
engines, pins and personalization. Filter and must_not clauses do not score, so the
ranking is the one the layers describe; no scoring layer can add a product.

Tiers change the base text clause only (``fulltext_match.json.j2``): strict needs every
term (``cross_fields``, ``operator: and``), relaxed 60% of them (``minimum_should_match``),
broad any term with typos (``best_fields``, ``fuzziness: AUTO``) for a text of at most
:data:`FUZZY_MAX_CHARS` characters, any term as written for a longer one: the engine
builds an automaton per fuzzy term and field, about 0.75 ms per character of the text
here, so a 512-character intent of made-up words cost it 0.2-0.3 s where a search costs
1-2 ms. Synonyms are alternative text clauses (any one must match); the title phrase only
adds score.

Economics multiplies the score by ``1 + ln(1 + m * margin) + ln(1 + p * popularity)``
(``field_value_factor`` with ``factor`` = the plan's weight, ``modifier: ln1p``,
``missing: 0``, summed with a constant ``weight: 1`` function, ``boost_mode: multiply``).
For fields in [0, 1], weights 1.0 give 1x to 1 + 2 ln 2 ~ 2.4x and margin weight 3.0 up
to ~3.1x; a wider field widens the range (ln1p of a popularity of 1000 is 6.9). A weight
of 0 leaves its function out; both at 0 leave the layer out. Catalog margins must not be
below 0 (the engines refuse a negative function score).

Pins: Elasticsearch uses ``pinned`` (ids in order, the scored query as ``organic``).
OpenSearch has no pinned query; the same semantics come from a ``bool`` whose ``should``
holds one ``constant_score`` per pinned id (boost ``(count - position) * PIN_STEP``) and
the scored query, ``minimum_should_match: 1``. On both engines a pinned product is shown
first, in pin order, even when it does not match the text, but only if it passes every
constraint: the pin layer sits inside the envelope, so a pinned id a guard, a filter or an
exclusion removes never appears. Hidden ids are never pinned (hide beats pin) nor
sponsored. Ids (pins, hides, sponsored, purchases) are document ``_id`` s, which the
catalog loader sets to the profile's ``id`` field.

Filters and exclusions on a text field (constraint ``match`` ``phrase`` or ``words``)
render as ``text_match.json.j2``: a ``bool`` whose ``should`` holds one ``match_phrase``
(or ``match`` with ``operator: and``) per value, analysed with the field's analyzer, so
"peanuts" removes every product whose text says peanut or peanuts; keyword fields keep
``terms``.

Clause names (``_name``), which the engine reports per hit in ``matched_queries``:

* a clause a policy adds is named ``<kind>:<policy id>`` (kinds in :data:`CLAUSE_KINDS`);
  a constraint several policies produced is named after the first of its ``policies``
  (the composer lists the winner first). The engine keeps one query per name, so a name
  used twice in one request gets ``#2``, ``#3``... in rendering order, and every clause
  stays individually reported. :func:`parse_clause_name` reads a name back.
* sponsored products: a weight function whose ids filter is named
  ``sponsored:<policy id>``; a hit is sponsored by that policy exactly when the name is in
  its ``matched_queries``.
* clauses without a policy: ``fulltext_match``, ``fulltext_synonym`` (``#2``... for the
  second synonym on), ``title_phrase_match`` and ``hide`` (the plan does not say which
  policy added a synonym or hid an id).

Every value that comes from the request or the plan reaches the DSL through ``tojson``
inside a template, so no text, however hostile, can change the structure of the query.
The templates are the single source of the DSL's shape, and they are compiled once
(``auto_reload`` off: no file system access per request). Rendering a clause does not
print values into JSON text and parse it back: inside a template ``tojson`` prints a
*hole* (a placeholder string) and keeps the value aside; the rendered text, made of the
template's own JSON and holes only, is parsed once per distinct text into a skeleton, and
each rendering fills the skeleton's holes with the values (see :func:`_clause`). The result
is the one the text round trip gives, key order included: ``json.dumps(sort_keys=True)``
semantics for every value that went through ``tojson`` (keys sorted at every level, tuples
as lists, no NaN), the template's order for the outermost template's own keys. A clause
made of scalars and flat lists of scalars only (filters, boosts, price bounds, text
clauses, facets) is rendered by Jinja once per distinct typed values and filled from its
cached skeleton and holes afterwards (ADR 0016). A template that embeds rendered clauses
(the envelope, the scoring layers, the request body) is rendered once per *shape* of its
values, with a stand-in for each clause that refuses every use but ``tojson``, and filled
with each call's own clauses afterwards (:func:`_container`, ADR 0029). Once reused, a kept
clause is a fresh copy loaded from the bytes of its first filling, and a container's shape
its own part loaded from bytes with the call's clauses put in their places (``orjson``,
checked to give back exactly what the fill gives: :func:`_copyable`, ADR 0040).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple, get_args

import orjson
from jinja2 import Environment, PackageLoader, StrictUndefined, pass_context

from control_plane.bounded import keep
from control_plane.plan import Boost, Constraint, Plan
from control_plane.policy import Value

if TYPE_CHECKING:
    from control_plane.catalog.profile import CatalogProfile, WeightedField

EngineKind = Literal["opensearch", "elasticsearch"]
Tier = Literal["strict", "relaxed", "broad"]
TIERS: Final[tuple[Tier, ...]] = get_args(Tier)
ENGINES: Final[tuple[EngineKind, ...]] = get_args(EngineKind)

ClauseKind = Literal[
    "guard",
    "guard_exclude",
    "filter",
    "category",
    "price",
    "exclude",
    "boost",
    "bury",
    "sponsored",
]
CLAUSE_KINDS: Final[tuple[ClauseKind, ...]] = get_args(ClauseKind)

#: Score step between two pinned positions on OpenSearch: far above any organic score.
PIN_STEP: Final = 1_000_000.0
#: Boost of the title phrase clause (``title_phrase_match``), which only adds score.
TITLE_PHRASE_BOOST: Final = 2.0
#: Buckets per terms facet.
FACET_SIZE: Final = 20
#: The engines' default ``index.max_result_window``: deeper pages are refused.
MAX_RESULT_WINDOW: Final = 10_000

TEMPLATES: Final = Environment(
    loader=PackageLoader("control_plane", "templates"),
    undefined=StrictUndefined,
    autoescape=False,
    keep_trailing_newline=False,
    auto_reload=False,
    cache_size=-1,
)
#: the rendered text of a hole: a JSON string no template writes itself
_HOLE = "\\u0000"
_HOLE_MARK = "\x00"


class ClauseName(NamedTuple):
    kind: str
    policy: str


def parse_clause_name(name: str) -> ClauseName | None:
    """``"boost:vegan#2"`` -> ``ClauseName("boost", "vegan")``; None for other names."""
    kind, sep, rest = name.partition(":")
    if not sep or kind not in CLAUSE_KINDS:
        return None
    return ClauseName(kind, rest.partition("#")[0])


class _Names:
    """Allocates the request's clause names, unique within the request."""

    def __init__(self) -> None:
        self._used: dict[str, int] = {}

    def __call__(self, kind: ClauseKind, policy: str) -> str:
        return self.unique(f"{kind}:{policy}")

    def unique(self, name: str) -> str:
        count = self._used.get(name, 0) + 1
        self._used[name] = count
        return name if count == 1 else f"{name}#{count}"


# --- rendering a template into data ----------------------------------------------------


@pass_context
def _hole(context: Any, value: Any) -> str:
    """``tojson`` inside a template: keep ``value`` aside, print a hole in its place."""
    holes: list[Any] = context["_holes"]
    holes.append(value)
    return f'"{_HOLE}{len(holes) - 1}"'


TEMPLATES.filters["tojson"] = _hole

Node = tuple[Any, ...]
"""A skeleton node: ("hole", n), ("value", scalar), ("list", nodes), ("dict", pairs, keyed,
the pairs sorted by key when no key is a hole)"""


def _node(parsed: Any) -> Node:
    if isinstance(parsed, str) and parsed.startswith(_HOLE_MARK):
        return ("hole", int(parsed[1:]))
    if isinstance(parsed, list):
        return ("list", tuple(_node(item) for item in parsed))
    if isinstance(parsed, dict):
        pairs = tuple(
            (int(key[1:]) if key.startswith(_HOLE_MARK) else key, _node(item))
            for key, item in parsed.items()
        )
        keyed = any(isinstance(key, int) for key, _ in pairs)
        return ("dict", pairs, keyed, None if keyed else tuple(sorted(pairs, key=_first)))
    return ("value", parsed)


_SKELETONS: dict[tuple[str, str], Node] = {}


def _skeleton(template: str, text: str) -> Node:
    """The parsed skeleton of one rendered text (parsed once, then cached)."""
    key = (template, text)
    node = _SKELETONS.get(key)
    if node is None:
        parsed = json.loads(text)
        if not isinstance(parsed, dict):
            raise TypeError(f"template {template} rendered {type(parsed).__name__}, not an object")
        node = _node(parsed)
        keep(_SKELETONS, key, node, 4096)  # loops make texts vary; keep the cache bounded
    return node


def _data(value: Any) -> Any:
    """``value`` as ``json.loads(json.dumps(value, sort_keys=True, allow_nan=False))`` gives
    it back, without the text. A dict is a clause this module rendered (already data)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if not math.isfinite(value):
            raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
        return value
    if kind is dict:
        return value
    if kind is list or kind is tuple:
        return [_data(item) for item in value]
    return json.loads(json.dumps(value, sort_keys=True, allow_nan=False))


def _fill(node: Node, holes: list[Any], nested: bool) -> Any:
    """A fresh copy of ``node`` with its holes filled; ``nested``: sort its objects' keys."""
    kind = node[0]
    if kind == "hole":
        return _data(holes[node[1]])
    if kind == "value":
        return node[1]
    if kind == "list":  # leaves inline: most nodes are holes and constants
        return [
            _data(holes[item[1]]) if item[0] == "hole" else item[1] if item[0] == "value"
            else _fill(item, holes, nested)
            for item in node[1]
        ]
    if not node[2]:  # the template's own keys: sorted once, when the skeleton was made
        return {
            key: _data(holes[item[1]]) if item[0] == "hole" else item[1] if item[0] == "value"
            else _fill(item, holes, nested)
            for key, item in (node[3] if nested else node[1])
        }
    pairs = []
    for key, item in node[1]:
        if type(key) is int:
            key = _data(holes[key])
            if type(key) is not str:
                raise ValueError(f"a JSON object key must be a string, not {key!r}")
        pairs.append((key, _fill(item, holes, nested)))
    if nested:  # a value that went through tojson: keys sorted, as json.dumps(sort_keys=True)
        pairs.sort(key=_first)
    return dict(pairs)


def _first(pair: tuple[str, Any]) -> str:
    return pair[0]


#: (template, outermost, the values typed) -> the skeleton and the holes Jinja gave for them,
#: and the filled clause's bytes (:func:`_copyable`, made at the first reuse: ``_UNMADE``
#: until then; None: filled from the skeleton)
_FRAGMENTS: dict[tuple[Any, ...], tuple[Node, list[Any], bytes | None]] = {}
#: off: every clause goes through Jinja (the reference path the tests compare against)
_FRAGMENT_CACHE = True


def _scalar(value: Any) -> tuple[type, Any]:
    """A hashable key that only equal JSON gives (``1``, ``1.0``, ``True``, ``-0.0`` apart)."""
    kind = type(value)
    if kind is float:
        return (kind, repr(value))
    if kind is str or kind is int or kind is bool or value is None:
        return (kind, value)
    raise TypeError(kind)


def _typed(value: Any) -> tuple[type, Any]:
    """A scalar or a flat list (tuple) of scalars, keyed; TypeError for anything else (a
    dict is a rendered clause: such templates are not cached)."""
    kind = type(value)
    if kind is list or kind is tuple:
        return (kind, tuple(_scalar(item) for item in value))
    return _scalar(value)


def _fragment_key(template: str, outermost: bool, values: dict[str, Any]) -> tuple[Any, ...] | None:
    try:
        return (template, outermost, tuple((name, _typed(value)) for name, value in values.items()))
    except TypeError:
        return None


def _clause(template: str, _outermost: bool = False, **values: Any) -> dict[str, Any]:
    """Render ``template`` with ``values`` into data: the dict that parsing its JSON text
    would give. ``_outermost`` keeps the template's own key order at its top level (the
    request body); a clause, which a parent template embeds through ``tojson``, has its
    keys sorted at every level, as ``json.dumps(sort_keys=True)`` would have printed them.

    A clause whose values are all scalars or flat lists of scalars (a filter, a boost, a
    price bound, a facet: what policies and profiles put in) is rendered by Jinja once per
    distinct values; later renderings fill the same skeleton with the same holes. The key
    holds every value the template receives, typed, so the result is the one Jinja gives:
    rendering is a function of those values alone, and a policy changed in a new version
    gives new values, hence a new key (a fragment is never reused for other values)."""
    key = _fragment_key(template, _outermost, values) if _FRAGMENT_CACHE else None
    if key is None and _FRAGMENT_CACHE:
        return _container(template, _outermost, values)
    found = _FRAGMENTS.get(key) if key is not None else None
    if found is not None and key is not None:  # its bytes made at its first reuse
        return _fresh(_with_bytes(key, found, not _outermost), not _outermost)
    holes: list[Any] = []
    text = TEMPLATES.get_template(template).render(_holes=holes, **values)
    node = _skeleton(template, text)
    if key is not None:
        # bounded: many distinct ids or texts come and go (no bytes yet: a clause of one
        # request's text is often never seen again)
        keep(_FRAGMENTS, key, (node, [tuple(h) if type(h) is list else h for h in holes], _UNMADE), 8192)
    filled: dict[str, Any] = _fill(node, holes, not _outermost)
    return filled


def _fresh(found: tuple[Node, list[Any], bytes | None], nested: bool) -> dict[str, Any]:
    """A fresh clause of a kept fragment: a copy from its bytes (the usual hit), else
    filled from its skeleton and holes."""
    if found[2] is not None and found[2] is not _UNMADE:
        copied: dict[str, Any] = orjson.loads(found[2])
        return copied
    filled: dict[str, Any] = _fill(found[0], found[1], nested)
    return filled


#: a kept fragment's bytes before its first reuse (the bytes of a clause are never empty)
_UNMADE: Final = b""


def _with_bytes(
    key: tuple[Any, ...], found: tuple[Node, list[Any], bytes | None], nested: bool
) -> tuple[Node, list[Any], bytes | None]:
    """``found`` (the entry of ``key``) with its bytes made if they are not yet."""
    if found[2] is _UNMADE:
        found = (found[0], found[1], _copyable(_fill(found[0], found[1], nested)))
        _FRAGMENTS[key] = found
    return found


def _copyable(filled: Any) -> bytes | None:
    """``filled`` (JSON data) as the bytes a fresh copy of it is loaded from
    (``orjson.loads``, several times faster than :func:`_fill` in Python), or None when
    those bytes would not give it back exactly: the copy must be equal type for type
    (``1``, ``1.0`` and ``True`` apart; ``orjson`` reads an integer past 64 bits as a
    float) and key for key in the same order, which ``json.dumps`` of the two compares.
    ``orjson`` refuses a lone surrogate (None too). Made once, when a fragment is kept."""
    try:
        data = orjson.dumps(filled)
    except (orjson.JSONEncodeError, TypeError):
        return None
    if json.dumps(orjson.loads(data)) != json.dumps(filled):
        return None
    return data


# --- containers: templates that embed rendered clauses ---------------------------------


class _Touched(Exception):
    """A template did something with a stand-in other than passing it through ``tojson``.
    Not an AttributeError, TypeError or LookupError: Jinja catches those (an attribute it
    cannot read becomes undefined), and the template would go on with another answer."""


class _Slot(dict[str, Any]):
    """Stands in for a rendered clause while a container template is rendered once per
    shape: ``tojson`` keeps it as a hole; reading it in any other way (truth, length,
    iteration, an attribute, an item, its keys or items, printing, comparing) raises
    :class:`_Touched`, and the template is then rendered with the real values, every
    time. A ``dict`` itself, so the type tests (``is mapping``, ``is string``...) answer
    what they answer for the clause it stands for."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index

    def _touched(self, *args: Any, **kwargs: Any) -> Any:
        raise _Touched("a clause stand-in was used other than through tojson")

    __bool__ = __len__ = __iter__ = __reversed__ = __getitem__ = __contains__ = _touched
    __repr__ = __str__ = __format__ = _touched
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __or__ = __ror__ = __ior__ = _touched
    keys = values = items = get = copy = pop = popitem = setdefault = update = clear = _touched
    __hash__ = None

    def __getattr__(self, name: str) -> Any:
        raise _Touched(name)


def _shaped(value: Any, slots: list[Any], stand_ins: bool = True) -> tuple[Any, Any]:
    """(a hashable key that only an equally shaped value gives, the value with a
    :class:`_Slot` for each clause). A clause is a dict holding a list or a dict: what
    :func:`_clause` returns; it is appended to ``slots``. A flat dict of scalars (a
    signal, a product weight) and lists are keyed item by item; TypeError for anything
    else. ``stand_ins`` off: the key and the slots only (None for the value), for a shape
    seen before, whose stand-ins are not needed again."""
    kind = type(value)
    if kind is dict:
        for item in value.values():  # a clause's first value already says so
            if type(item) not in _SCALARS:
                slots.append(value)
                return _CLAUSE, _Slot(len(slots) - 1) if stand_ins else None
        keys = tuple(value)
        if not all(type(name) is str for name in keys):
            raise TypeError("a dict key that is not a string")
        return (dict, tuple((name, _scalar(item)) for name, item in value.items())), value
    if kind is list or kind is tuple:
        shapes: list[Any] = []
        stands: list[Any] = []
        for item in value:
            if type(item) is dict and item and type(next(iter(item.values()))) not in _SCALARS:
                slots.append(item)  # a clause (its first value says so): the usual item
                shapes.append(_CLAUSE)
                if stand_ins:
                    stands.append(_Slot(len(slots) - 1))
            else:
                key, stand = _shaped(item, slots, stand_ins)
                shapes.append(key)
                stands.append(stand)
        return (kind, tuple(shapes)), kind(stands) if stand_ins else None
    return _scalar(value), value


_CLAUSE = ("clause",)


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _unslotted(hole: Any, slots: list[Any]) -> Any:
    """A stored hole with this call's clauses in place of their stand-ins."""
    kind = type(hole)
    if kind is _Slot:
        return slots[hole.index]
    if kind is tuple:
        return [_unslotted(item, slots) for item in hole]
    return hole


def _storable(hole: Any) -> Any:
    """A hole as kept for later calls: lists as tuples; a dict (a value the template made or
    passed whole, which later calls must not share) is refused (TypeError)."""
    kind = type(hole)
    if kind is list or kind is tuple:
        return tuple(_storable(item) for item in hole)
    if kind is dict:
        raise TypeError("a dict hole")
    return hole


#: (template, outermost, the values' shape) -> the skeleton and holes (with stand-ins) for
#: that shape and its copy (:func:`_copy_of`; None: filled from the skeleton), or None: the
#: template uses a clause other than through tojson
_SHAPES: dict[tuple[Any, ...], tuple[Node, tuple[Any, ...], _Copy | None] | None] = {}
_UNSEEN: Any = object()


def _container(template: str, outermost: bool, values: dict[str, Any]) -> dict[str, Any]:
    """:func:`_clause` for a template that embeds rendered clauses (the envelope, the
    scoring layers, the request body): Jinja renders it once per shape of its values,
    with a stand-in for each clause, and later calls fill the same skeleton with their
    own clauses. The key holds every value that is not a clause, typed, and the shape of
    every list, so the text is the one Jinja gives for the real values: a template that
    does anything with a clause but print it through ``tojson`` is rendered with the real
    values every time (ADR 0029). A shape seen before is a copy of the template's own
    part, loaded from its bytes, with this call's clauses put in (:class:`_Copy`)."""
    slots: list[Any] = []
    try:
        key = (
            template,
            outermost,
            tuple([(name, _shaped(value, slots, False)[0]) for name, value in values.items()]),
        )
    except TypeError:
        return _rendered(template, outermost, values)
    found = _SHAPES.get(key, _UNSEEN)
    if found is _UNSEEN:
        holes: list[Any] = []
        try:
            again: list[Any] = []  # the same slots, in the same order, with their stand-ins
            stand_ins = {name: _shaped(value, again)[1] for name, value in values.items()}
            text = TEMPLATES.get_template(template).render(_holes=holes, **stand_ins)
            node, stored = _skeleton(template, text), tuple(_storable(hole) for hole in holes)
            found = (node, stored, _copy_of(node, stored, not outermost))
        except Exception:  # the template used a clause: no shape to keep (rendered below)
            found = None
        keep(_SHAPES, key, found, 4096)  # bounded, as the fragments are
    if found is None:
        return _rendered(template, outermost, values)
    node, stored, copy = found
    if copy is not None:
        filled: dict[str, Any] = orjson.loads(copy.data)
        for parents, last, hole in copy.places:
            target: Any = filled
            for step in parents:
                target = target[step]
            target[last] = slots[hole.index] if type(hole) is _Slot else _data(_unslotted(hole, slots))
        return filled
    filled = _fill(node, [_unslotted(hole, slots) for hole in stored], not outermost)
    return filled


class _Copy(NamedTuple):
    """A container's shape as bytes and places: ``orjson.loads(data)`` is what :func:`_fill`
    makes of its skeleton with None where a hole holds clauses, and each place says where
    such a hole goes (the keys and indexes down to it) and which stored hole it is."""

    data: bytes
    places: tuple[tuple[tuple[str | int, ...], str | int, Any], ...]


def _copy_of(node: Node, stored: tuple[Any, ...], nested: bool) -> _Copy | None:
    """The :class:`_Copy` of a container's skeleton and stored holes, or None when its
    bytes would not give back what :func:`_fill` makes (:func:`_copyable`), or a hole with
    clauses is a key. Each hole that holds a clause is filled with a marker (an empty dict,
    which :func:`_data` hands on as it is, as it hands on a clause) and found again."""
    markers: dict[int, Any] = {}
    holes: list[Any] = []
    for hole in stored:
        if _slotted(hole):
            marker: dict[str, Any] = {}
            markers[id(marker)] = (marker, hole)
            holes.append(marker)
        else:
            holes.append(hole)
    try:
        filled = _fill(node, holes, nested)
    except (ValueError, TypeError):
        return None
    places: list[tuple[tuple[str | int, ...], str | int, Any]] = []
    _find(filled, (), markers, places)
    data = _copyable(filled)
    if data is None or len(places) != len(markers):  # (a hole printed twice: filled as before)
        return None
    return _Copy(data, tuple(places))


def _slotted(hole: Any) -> bool:
    """A stored hole holds a clause's stand-in."""
    kind = type(hole)
    return kind is _Slot or (kind is tuple and any(_slotted(item) for item in hole))


def _find(
    value: Any,
    path: tuple[str | int, ...],
    markers: dict[int, Any],
    places: list[tuple[tuple[str | int, ...], str | int, Any]],
) -> None:
    """Record where each marker of ``markers`` is in ``value`` and put None there."""
    kind = type(value)
    children: Any = value.items() if kind is dict else enumerate(value) if kind is list else ()
    for key, item in list(children):
        found = markers.get(id(item))
        if found is not None and found[0] is item:
            places.append((path, key, found[1]))
            value[key] = None
        else:
            _find(item, (*path, key), markers, places)


def _rendered(template: str, outermost: bool, values: dict[str, Any]) -> dict[str, Any]:
    """``template`` through Jinja with the real values (no cache but the skeleton's)."""
    holes: list[Any] = []
    text = TEMPLATES.get_template(template).render(_holes=holes, **values)
    filled: dict[str, Any] = _fill(_skeleton(template, text), holes, not outermost)
    return filled


def _finite(what: str, value: float, *, positive: bool = False) -> float:
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        sign = "positive" if positive else "non-negative"
        raise ValueError(f"{what} must be a finite, {sign} number, not {value!r}")
    return value


def render(
    plan: Plan,
    profile: CatalogProfile,
    *,
    engine: EngineKind,
    tier: Tier,
    personalization: Sequence[tuple[str, float]] = (),
    page: int = 1,
    size: int = 10,
    facets: bool = True,
) -> dict[str, Any]:
    """The full search request body for ``plan`` at ``tier`` on ``engine``.

    ``personalization`` holds (product id, weight) pairs, weights > 0 (1 is neutral).
    Raises ValueError for an unknown engine or tier, a page below 1, a negative size,
    a page past the engines' result window, or a weight that is not a finite number.
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    if tier not in TIERS:
        raise ValueError(f"unknown tier {tier!r}; known: {', '.join(TIERS)}")
    if page < 1 or size < 0:
        raise ValueError(f"page must be >= 1 and size >= 0 (page={page}, size={size})")
    offset = (page - 1) * size
    if offset + size > MAX_RESULT_WINDOW:
        raise ValueError(f"page {page} of size {size} is past the {MAX_RESULT_WINDOW} hit window")

    names = _Names()
    filters, exclusions = _constraints(plan, profile, names)
    query = _base_query(plan, profile, tier, names)
    query = _governance_score(query, plan, names)
    query = _economics(query, plan, profile)
    query = _personalization(query, personalization)
    query = _pins(query, plan, engine)
    query = _clause("constraints.json.j2", filters=filters, exclusions=exclusions, query=query)
    return _clause(
        "search.json.j2",
        _outermost=True,
        query=query,
        offset=offset,
        size=size,
        display=list(profile.display),
        aggs=_facets(profile) if facets else None,
    )


# --- layer 1: base text ---------------------------------------------------------------


def _weighted(fields: Sequence[WeightedField]) -> list[str]:
    return [f"{f.field}^{_finite('a full-text field weight', float(f.weight))}" for f in fields]


FUZZY_MAX_CHARS = 64
"""the longest text the broad tier forgives typos in (module docstring)"""


def _base_query(plan: Plan, profile: CatalogProfile, tier: Tier, names: _Names) -> dict[str, Any]:
    if plan.route == "browse" or not plan.residual.strip():
        return _clause("base_query.json.j2", matches=[], phrases=[])
    fields = list(profile.fulltext)
    if plan.route == "title":
        fields = [f for f in fields if f.field.split(".")[0] == profile.title]
    weighted = _weighted(fields) or [profile.title]
    texts = [(plan.residual, "fulltext_match")]
    texts += [(s, "fulltext_synonym") for s in plan.synonyms if s.strip()]
    matches = [
        _clause(
            "fulltext_match.json.j2", text=t, fields=weighted, tier=tier, name=names.unique(n),
            fuzzy=len(t) <= FUZZY_MAX_CHARS,
        )
        for t, n in texts
    ]
    phrase = _clause(
        "title_phrase_match.json.j2",
        field=profile.title_phrase,
        text=plan.residual,
        boost=TITLE_PHRASE_BOOST,
    )
    return _clause("base_query.json.j2", matches=matches, phrases=[phrase])


# --- layer 2: governance --------------------------------------------------------------


def _terms(
    template: str, kind: ClauseKind, field: str, constraint: Constraint, names: _Names
) -> dict[str, Any]:
    if not constraint.policies:
        raise ValueError(f"the {kind} constraint on {field!r} names no policy")
    values: list[Value] = list(constraint.values)
    name = names(kind, constraint.policies[0])
    if constraint.match != "terms":  # a text field: analysed with the field's own analyzer
        return _clause(
            "text_match.json.j2", field=field, values=values, phrase=constraint.match == "phrase",
            name=name,
        )
    return _clause(template, field=field, values=values, name=name)


def _constraints(
    plan: Plan, profile: CatalogProfile, names: _Names
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    filters = [_terms("filter_terms.json.j2", "guard", c.field, c, names) for c in plan.guards]
    filters += [_terms("filter_terms.json.j2", "filter", c.field, c, names) for c in plan.filters]
    if plan.category is not None:
        filters.append(
            _terms("filter_terms.json.j2", "category", plan.category.field, plan.category, names)
        )
    for operator, bound in (("gte", plan.price.min), ("lte", plan.price.max)):
        if bound is not None:
            filters.append(
                _clause(
                    "price_range.json.j2",
                    field=profile.price,
                    operator=operator,
                    value=_finite("a price bound", bound.value),
                    name=names("price", bound.policy),
                )
            )
    exclusions = [
        _terms("exclude_terms.json.j2", "guard_exclude", c.field, c, names)
        for c in plan.guard_exclusions
    ]
    exclusions += [
        _terms("exclude_terms.json.j2", "exclude", c.field, c, names) for c in plan.exclusions
    ]
    hidden = sorted(set(plan.hides))
    if hidden:
        exclusions.append(_clause("hide_ids.json.j2", ids=hidden))
    return filters, exclusions


def _governance_score(query: dict[str, Any], plan: Plan, names: _Names) -> dict[str, Any]:
    functions = [_boost_function(boost, names) for boost in plan.boosts]
    hidden = set(plan.hides)
    for sponsored in plan.sponsored:
        ids = [i for i in dict.fromkeys(sponsored.ids) if i not in hidden]
        if ids:
            functions.append(
                _clause(
                    "sponsored_function.json.j2",
                    ids=ids,
                    weight=_finite("a sponsored weight", sponsored.weight, positive=True),
                    name=names("sponsored", sponsored.policy),
                )
            )
    if not functions:
        return query
    return _clause("governance_score.json.j2", query=query, functions=functions)


def _boost_function(boost: Boost, names: _Names) -> dict[str, Any]:
    """``boost_function.json.j2`` for ``boost``: what :func:`_clause` gives, its fragment
    key's typed values but the name kept per boost object (a policy's boost is the same
    object from plan to plan: ``composer_fields``)."""
    template = "boost_function.json.j2"
    entry = _BOOST_PARTS.get(id(boost))
    if entry is None or entry[0] is not boost:
        weight = _finite("a boost weight", boost.weight, positive=True)
        values = {"field": boost.field, "values": list(boost.values), "weight": weight}
        try:
            parts: tuple[Any, ...] | None = tuple((key, _typed(value)) for key, value in values.items())
        except TypeError:
            parts = None
        entry = (boost, parts, {})
        keep(_BOOST_PARTS, id(boost), entry, 8192)  # bounded, as the fragments are
    name = names("boost" if boost.weight >= 1 else "bury", boost.policy)
    parts = entry[1]
    if parts is not None and _FRAGMENT_CACHE:
        by_name = entry[2]
        found = by_name.get(name)  # the usual call: this boost under this name again
        if found is None:
            key = (template, False, (*parts, ("name", _scalar(name))))
            found = _FRAGMENTS.get(key)
            if found is not None:
                found = _with_bytes(key, found, True)  # (a reuse)
                if len(by_name) < _NAMES_PER_BOOST:
                    by_name[name] = found
        if found is not None:
            return _fresh(found, True)
    return _clause(
        template,
        field=boost.field,
        values=list(boost.values),
        weight=_finite("a boost weight", boost.weight, positive=True),
        name=name,
    )


#: id(boost) -> (the boost, its fragment key's typed field, values and weight, or None:
#: not a fragment, and its clause name -> the fragment's skeleton, holes and bytes: what
#: ``_FRAGMENTS`` holds for the whole key, found without building and hashing the key);
#: the entry holds the boost, so its id is not reused while it is there
_BOOST_PARTS: dict[
    int, tuple[Boost, tuple[Any, ...] | None, dict[str, tuple[Node, list[Any], bytes | None]]]
] = {}
#: clause names kept per boost (``boost:<policy>``, then ``#2``... when a name repeats)
_NAMES_PER_BOOST = 4


# --- layers 3 and 4: economics and personalization ------------------------------------


def _economics(query: dict[str, Any], plan: Plan, profile: CatalogProfile) -> dict[str, Any]:
    signals = [
        {"field": field, "weight": _finite(f"the {what} weight", weight.value) / scale}
        for what, field, weight, scale in (
            ("margin", profile.margin, plan.margin_weight, profile.margin_scale),
            ("popularity", profile.popularity, plan.popularity_weight, profile.popularity_scale),
        )
        if weight.value != 0 and field is not None  # a catalog without the role: no signal
    ]
    if not signals:
        return query
    return _clause("economics.json.j2", query=query, signals=signals)


def _personalization(
    query: dict[str, Any], personalization: Sequence[tuple[str, float]]
) -> dict[str, Any]:
    weights: dict[str, float] = {}
    for product_id, weight in personalization:
        _finite("a personalization weight", weight, positive=True)
        weights[product_id] = max(weight, weights.get(product_id, weight))
    if not weights:
        return query
    products = [{"id": i, "weight": weights[i]} for i in sorted(weights)]
    return _clause("personalization.json.j2", query=query, products=products)


# --- layer 5: pins ---------------------------------------------------------------------


def _pins(query: dict[str, Any], plan: Plan, engine: EngineKind) -> dict[str, Any]:
    hidden = set(plan.hides)
    ids = [i for i in dict.fromkeys(plan.pins) if i not in hidden]
    if not ids:
        return query
    if engine == "elasticsearch":
        return _clause("pinned_elasticsearch.json.j2", query=query, ids=ids)
    return _clause("pinned_opensearch.json.j2", query=query, ids=ids, step=PIN_STEP)


# --- facets ----------------------------------------------------------------------------


def _facets(profile: CatalogProfile) -> dict[str, Any]:
    """The facets clause: a function of the profile alone, so its fragment (skeleton and
    holes) is kept per profile object once rendered, and only filled afterwards."""
    kept = _FACETS.get(id(profile)) if _FRAGMENT_CACHE else None
    if kept is not None and kept[0] is profile:
        filled: dict[str, Any] = (
            orjson.loads(kept[3]) if kept[3] is not None else _fill(kept[1], kept[2], True)
        )
        return filled
    edges = [_finite("a price facet edge", float(e)) for e in profile.facets.price_ranges]
    values: dict[str, Any] = {
        "category_field": profile.facets.category, "brand_field": profile.facets.brand,
        "price_field": profile.price, "edges": edges, "size": FACET_SIZE,
    }
    key = _fragment_key("facets.json.j2", False, values) if _FRAGMENT_CACHE else None
    clause = _clause("facets.json.j2", **values)
    found = _FRAGMENTS.get(key) if key is not None else None
    if found is not None and key is not None:
        found = _with_bytes(key, found, True)  # (kept for reuse)
        keep(_FACETS, id(profile), (profile, found[0], found[1], found[2]), 64)  # a profile or two
    return clause


#: id(profile) -> (the profile, its facets clause's skeleton, holes and bytes); the entry
#: holds the profile (frozen), so its id is not reused while it is there
_FACETS: dict[int, tuple[Any, Node, list[Any], bytes | None]] = {}

