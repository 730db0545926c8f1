"""Demo personas (``data/personas.yaml``): invented shoppers and their purchase history.

The purchase history feeds the personalization layer (the ``user_purchases`` index);
product ids must exist in the catalog (:func:`unknown_products` says which do not).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from control_plane import yaml_aliases
from control_plane.catalog.product import Language


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Purchase(_Frozen):
    product_id: str = Field(min_length=1)
    count: int = Field(ge=1)
    last_purchased: date


class Persona(_Frozen):
    id: str = Field(pattern=r"^[a-z][a-z0-9_-]*$")
    name: str
    description: str = ""
    language: Language
    market: str
    cohorts: tuple[str, ...] = ()
    purchases: tuple[Purchase, ...] = ()

    def most_bought(self) -> Purchase | None:
        """The purchase with the highest count (ties: most recent, then product id)."""
        if not self.purchases:
            return None
        return max(self.purchases, key=lambda p: (p.count, p.last_purchased, p.product_id))


class Personas(_Frozen):
    as_of: date
    """the demo's reference day for purchase ages"""
    personas: tuple[Persona, ...]

    def get(self, persona_id: str) -> Persona:
        for persona in self.personas:
            if persona.id == persona_id:
                return persona
        raise KeyError(persona_id)

    def unknown_products(self, catalog_ids: Iterable[str]) -> list[tuple[str, str]]:
        """(persona id, product id) of purchases whose product is not in the catalog."""
        known = set(catalog_ids)
        return [
            (persona.id, p.product_id)
            for persona in self.personas
            for p in persona.purchases
            if p.product_id not in known
        ]


def load_personas(path: Path | str) -> Personas:
    raw: Any = yaml_aliases.safe_load(Path(path).read_text(encoding="utf-8"))
    return Personas.model_validate(raw)
