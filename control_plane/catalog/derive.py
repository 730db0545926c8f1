"""Command line: ``python -m control_plane.catalog.derive --tsv SRC --out data/catalog.ndjson``.

Derives the demo catalog (see :mod:`control_plane.catalog.derivation`) and prints the
derivation report as JSON. ``--check`` compares instead of writing and exits 1 when the
committed catalog is stale; ``--trim-source PATH`` also writes the source TSV reduced to
the columns the derivation reads (how ``data/source/openfoodfacts-sample.tsv`` was made).

This module also re-exports the derivation API (``derive_catalog``, ``read_tsv``,
``write_ndjson``...), so ``from control_plane.catalog.derive import derive_catalog`` works.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from control_plane.catalog.derivation import (
    DEFAULT_OUT,
    DEFAULT_RULES,
    DEFAULT_SOURCE,
    DEFAULT_SUPPLEMENT,
    SOURCE_COLUMNS,
    Derivation,
    DerivationReport,
    derive,
    derive_catalog,
    ndjson_bytes,
    read_ndjson,
    read_tsv,
    write_ndjson,
    write_trimmed_tsv,
)
from control_plane.catalog.supplement import load_supplement
from control_plane.catalog.taxonomy import load_taxonomy

__all__ = [
    "SOURCE_COLUMNS",
    "Derivation",
    "DerivationReport",
    "derive",
    "derive_catalog",
    "main",
    "ndjson_bytes",
    "read_ndjson",
    "read_tsv",
    "write_ndjson",
    "write_trimmed_tsv",
]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m control_plane.catalog.derive", description=__doc__
    )
    parser.add_argument("--tsv", type=Path, default=DEFAULT_SOURCE, help="Open Food Facts TSV")
    parser.add_argument("--supplement", type=Path, default=DEFAULT_SUPPLEMENT)
    parser.add_argument("--rules", type=Path, default=DEFAULT_RULES, help="category rules YAML")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--check", action="store_true", help="compare with --out, write nothing; exit 1 if stale"
    )
    parser.add_argument(
        "--trim-source", type=Path, metavar="PATH", help="also write the source trimmed to "
        "the columns the derivation reads"
    )
    args = parser.parse_args(argv)
    rows = read_tsv(args.tsv)
    derivation = derive(rows, load_supplement(args.supplement), load_taxonomy(args.rules))
    data = ndjson_bytes(derivation.documents())
    if args.trim_source:
        write_trimmed_tsv(rows, args.trim_source)
    print(derivation.report.model_dump_json(indent=2))
    if args.check:
        current = args.out.read_bytes() if args.out.exists() else b""
        if current != data:
            print(f"{args.out} is stale: run without --check to regenerate", file=sys.stderr)
            return 1
        print(f"{args.out} is up to date", file=sys.stderr)
        return 0
    args.out.write_bytes(data)
    print(f"wrote {derivation.report.total} products to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
