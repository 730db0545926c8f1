"""The hand-written demo supplement (``data/supplement.yaml``), govsearch's own data.

Demo products make the acceptance examples meaningful where the Open Food Facts sample
has nothing to show (fresh oranges, baby formula, Christmas chocolates...). Their ids start
with ``demo-``; their economics are written by hand and still listed as modelled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from control_plane import yaml_aliases
from control_plane.catalog.markets import COUNTRY_MARKETS
from control_plane.catalog.product import Language
from control_plane.catalog.tags import ALLERGENS

DEMO_PREFIX = "demo-"


class DemoItem(BaseModel):
    """One supplement entry as written in YAML."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^demo-[a-z0-9][a-z0-9-]*$")
    title: str = Field(min_length=1)
    brand: str | None = None
    text: str = ""
    language: Language
    market: tuple[str, ...] = Field(min_length=1)
    category: str = Field(min_length=1)
    allergens: tuple[str, ...] = ()
    traces: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    price: float = Field(gt=0)
    margin: float = Field(ge=0, le=1)
    popularity: float = Field(ge=0, le=1000)
    in_stock: bool = True
    on_clearance: bool = False

    @field_validator("allergens", "traces")
    @classmethod
    def _known_allergens(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(value) - ALLERGENS)
        if unknown:
            raise ValueError(f"unknown allergen tags {unknown}; use {sorted(ALLERGENS)}")
        return tuple(sorted(set(value)))

    @field_validator("market")
    @classmethod
    def _known_markets(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(value) - set(COUNTRY_MARKETS.values()))
        if unknown:
            raise ValueError(f"unknown market codes {unknown}")
        return value

    @field_validator("labels")
    @classmethod
    def _sorted_labels(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted(set(value)))


class SupplementError(ValueError):
    """Every problem found in the supplement, one line each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid demo supplement: " + "; ".join(problems))


def parse_supplement(items: list[dict[str, Any]]) -> list[DemoItem]:
    """Validate raw supplement entries; all problems are reported together."""
    parsed: list[DemoItem] = []
    problems: list[str] = []
    seen: set[str] = set()
    for index, raw in enumerate(items):
        try:
            item = DemoItem.model_validate(raw)
        except ValidationError as exc:
            ident = raw.get("id", f"#{index}") if isinstance(raw, dict) else f"#{index}"
            problems.extend(
                f"{ident}.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
            continue
        if item.id in seen:
            problems.append(f"{item.id}: duplicate id")
        seen.add(item.id)
        parsed.append(item)
    if problems:
        raise SupplementError(problems)
    return parsed


def load_supplement(path: Path) -> list[dict[str, Any]]:
    """The raw entries of a supplement file (``products:`` list)."""
    raw: Any = yaml_aliases.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(raw, dict) or not isinstance(raw.get("products"), list):
        raise SupplementError([f"{path}: expected a mapping with a 'products' list"])
    products: list[dict[str, Any]] = raw["products"]
    return products
