"""The catalog document: one product as it is indexed, with exactly these fields.

Observed fields come from Open Food Facts (``source: openfoodfacts``) or from the
hand-written demo supplement (``source: govsearch-demo``). Economic and stock fields are
*modelled*, never observed; every document lists them in ``modelled``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Language = Literal["en", "fr"]
Source = Literal["openfoodfacts", "govsearch-demo"]

#: The fields no source observed: derived from a per-category table and a hash of the id
#: (Open Food Facts rows) or written by hand (demo products).
MODELLED_FIELDS: tuple[str, ...] = ("price", "margin", "popularity", "in_stock", "on_clearance")


class Product(BaseModel):
    """One catalog document. ``model_dump()`` is what goes into the index."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    title: str = Field(min_length=1)
    brand: str | None
    text: str
    language: Language
    market: tuple[str, ...] = Field(min_length=1)
    category: str = Field(min_length=1)
    categories: tuple[str, ...] = Field(min_length=1)
    allergens: tuple[str, ...]
    traces: tuple[str, ...]
    labels: tuple[str, ...]
    diet: tuple[str, ...]
    in_stock: bool
    visible: bool
    on_clearance: bool
    price: float = Field(gt=0)
    margin: float = Field(ge=0, le=1)
    popularity: float = Field(ge=0, le=1000)
    modelled: tuple[str, ...] = MODELLED_FIELDS
    source: Source

    def document(self) -> dict[str, object]:
        """The JSON-ready document (lists, not tuples)."""
        return self.model_dump(mode="json")
