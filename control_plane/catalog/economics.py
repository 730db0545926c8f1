"""Modelled economics and stock for Open Food Facts rows: no randomness, no clock.

Open Food Facts has no prices, margins, popularity or stock. The demo needs them, so
they are modelled from the product's category (a base price and base margin per
taxonomy node, see ``data/category_rules.yaml``) and from ``sha256("<field>:<id>")``,
read as a number ``u`` in [0, 1):

- ``price``      = base_price * (0.6 + 0.9 u), rounded to cents, at least 0.29
- ``margin``     = base_margin + 0.2 (u - 0.5), clamped to [0.02, 0.9], 3 decimals
- ``popularity`` = round(1000 u^2): a long tail, few very popular products
- ``in_stock``   = u >= 0.05 (about 95% in stock)
- ``on_clearance`` = u < 0.05 (about 5%)

Each field hashes with its own name, so the five values of one product are independent.
"""

from __future__ import annotations

import hashlib

from pydantic import BaseModel, ConfigDict


class Economics(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    price: float
    margin: float
    popularity: float
    in_stock: bool
    on_clearance: bool


def unit(field: str, product_id: str) -> float:
    """A number in [0, 1) fixed by the field name and the product id."""
    digest = hashlib.sha256(f"{field}:{product_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def model_economics(product_id: str, base_price: float, base_margin: float) -> Economics:
    """The modelled economics of one product (see the module docstring)."""
    price = max(0.29, round(base_price * (0.6 + 0.9 * unit("price", product_id)), 2))
    margin = base_margin + 0.2 * (unit("margin", product_id) - 0.5)
    popularity = float(round(1000 * unit("popularity", product_id) ** 2))
    return Economics(
        price=price,
        margin=round(min(0.9, max(0.02, margin)), 3),
        popularity=popularity,
        in_stock=unit("in_stock", product_id) >= 0.05,
        on_clearance=unit("on_clearance", product_id) < 0.05,
    )
