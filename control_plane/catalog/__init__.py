"""The demo catalog: its derivation from Open Food Facts, its profile and its statistics.

- :mod:`.derivation`: ``derive_catalog`` (pure), ``read_tsv``, ``write_ndjson``
- :mod:`.derive`: the command line (``python -m control_plane.catalog.derive``)
- :mod:`.taxonomy`: category tree and rules (``data/category_rules.yaml``)
- :mod:`.profile`: ``CatalogProfile`` (which field plays which role), ``load_profile``
- :mod:`.stats`: ``category_price_stats`` and its JSON round trip
- :mod:`.personas`: demo shoppers and their purchase history
"""

from control_plane.catalog.derivation import (
    Derivation,
    DerivationReport,
    derive,
    derive_catalog,
    ndjson_bytes,
    read_ndjson,
    read_tsv,
    write_ndjson,
)
from control_plane.catalog.personas import Persona, Personas, Purchase, load_personas
from control_plane.catalog.product import MODELLED_FIELDS, Product
from control_plane.catalog.profile import (
    CatalogProfile,
    CatalogProfileError,
    Facets,
    WeightedField,
    load_profile,
    mapping_fields,
)
from control_plane.catalog.stats import (
    ALL,
    PERCENTILES,
    CategoryStats,
    category_price_stats,
    stats_from_json,
    stats_to_json,
)
from control_plane.catalog.supplement import SupplementError, load_supplement
from control_plane.catalog.taxonomy import (
    CategoryRulesError,
    Classification,
    Taxonomy,
    load_taxonomy,
)

__all__ = [
    "ALL",
    "MODELLED_FIELDS",
    "PERCENTILES",
    "CatalogProfile",
    "CatalogProfileError",
    "CategoryRulesError",
    "CategoryStats",
    "Classification",
    "Derivation",
    "DerivationReport",
    "Facets",
    "Persona",
    "Personas",
    "Product",
    "Purchase",
    "SupplementError",
    "Taxonomy",
    "WeightedField",
    "category_price_stats",
    "derive",
    "derive_catalog",
    "load_personas",
    "load_profile",
    "load_supplement",
    "load_taxonomy",
    "mapping_fields",
    "ndjson_bytes",
    "read_ndjson",
    "read_tsv",
    "stats_from_json",
    "stats_to_json",
    "write_ndjson",
]
