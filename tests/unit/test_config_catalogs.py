"""Named catalogs: ``catalogs`` in the file, chosen by ``--catalog``, ``GOVSEARCH_CATALOG``
or ``default_catalog``; each brings its profile, products and policies."""

from __future__ import annotations

from pathlib import Path

import pytest

from control_plane.cli import build_parser
from control_plane.config import UnknownCatalogError, load_settings

CONFIG = """
catalog: {profile: demo.profile.yaml, file: demo.ndjson}
policies: {dir: demo-policies, index_prefix: gp}
catalogs:
  fashion: {profile: fashion.profile.yaml, file: fashion.ndjson, policies_dir: fashion-policies}
  home: {profile: home.profile.yaml, file: home.ndjson, policies_index_prefix: home-p}
"""


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "govsearch.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


def test_without_a_name_the_catalog_section_is_used(config_file: Path) -> None:
    settings = load_settings(config_file, environ={})
    assert settings.selected_catalog == "default"
    assert (settings.catalog.profile, settings.policies.dir, settings.policies.index_prefix) == (
        "demo.profile.yaml", "demo-policies", "gp",
    )


def test_the_catalog_section_brings_its_own_policies_and_named_ones_never_take_them(
    config_file: Path,
) -> None:
    """``catalog.policies_dir`` and ``catalog.policies_index_prefix`` are the default catalog's
    (docs/configuration.md): they replace ``policies.dir`` and ``policies.index_prefix`` for it,
    and a named catalog without its own still falls back on ``policies``, not on them."""
    own = CONFIG.replace(
        "catalog: {profile: demo.profile.yaml, file: demo.ndjson}",
        "catalog: {profile: demo.profile.yaml, file: demo.ndjson, policies_dir: own-policies,"
        " policies_index_prefix: own-p}",
    )
    config_file.write_text(own, encoding="utf-8")
    for chosen in (None, "default"):
        settings = load_settings(config_file, environ={}, catalog=chosen)
        assert settings.selected_catalog == "default"
        assert (settings.policies.dir, settings.policies.index_prefix) == ("own-policies", "own-p")
    home = load_settings(config_file, environ={}, catalog="home")
    assert (home.policies.dir, home.policies.index_prefix) == ("demo-policies", "home-p")
    fashion = load_settings(config_file, environ={}, catalog="fashion")
    assert (fashion.policies.dir, fashion.policies.index_prefix) == ("fashion-policies", "gp-fashion")
    only_dir = CONFIG.replace("file: demo.ndjson}", "file: demo.ndjson, policies_dir: own-policies}", 1)
    config_file.write_text(only_dir, encoding="utf-8")
    settings = load_settings(config_file, environ={})
    assert (settings.policies.dir, settings.policies.index_prefix) == ("own-policies", "gp")


def test_a_named_catalog_brings_its_profile_products_policies_and_own_index_prefix(
    config_file: Path,
) -> None:
    settings = load_settings(config_file, environ={}, catalog="fashion")
    assert settings.selected_catalog == "fashion"
    assert (settings.catalog.profile, settings.catalog.file) == ("fashion.profile.yaml", "fashion.ndjson")
    assert (settings.policies.dir, settings.policies.index_prefix) == ("fashion-policies", "gp-fashion")
    home = load_settings(config_file, environ={}, catalog="home")
    assert (home.policies.dir, home.policies.index_prefix) == ("demo-policies", "home-p")


def test_the_environment_and_the_default_select_and_the_option_wins(config_file: Path) -> None:
    assert load_settings(config_file, environ={"GOVSEARCH_CATALOG": "home"}).selected_catalog == "home"
    with_default = config_file.read_text(encoding="utf-8") + "default_catalog: fashion\n"
    config_file.write_text(with_default, encoding="utf-8")
    assert load_settings(config_file, environ={}).selected_catalog == "fashion"
    chosen = load_settings(config_file, environ={"GOVSEARCH_CATALOG": "home"}, catalog="default")
    assert chosen.selected_catalog == "default" and chosen.catalog.profile == "demo.profile.yaml"


def test_an_unknown_catalog_is_refused_with_the_known_names(config_file: Path) -> None:
    known = r"unknown catalog 'shoes' \(known: default, fashion, home\)"
    with pytest.raises(UnknownCatalogError, match=known):
        load_settings(config_file, environ={}, catalog="shoes")
    config_file.write_text(CONFIG + "default_catalog: shoes\n", encoding="utf-8")
    with pytest.raises(UnknownCatalogError):
        load_settings(config_file, environ={})


@pytest.mark.parametrize("argv", [
    ["search", "x"], ["compile", "x"], ["serve"], ["demo"], ["load-catalog"],
    ["policy", "publish"], ["policy", "test"], ["policy", "lint"], ["policy", "check"],
])
def test_every_command_takes_catalog_before_or_after_its_name(argv: list[str]) -> None:
    parser = build_parser()
    assert parser.parse_args(["--catalog", "fashion", *argv]).catalog == "fashion"
    assert parser.parse_args([*argv, "--catalog", "fashion"]).catalog == "fashion"
    assert parser.parse_args(argv).catalog is None


def test_an_unknown_catalog_on_the_command_line_is_a_usage_error(
    config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from control_plane.cli import main

    assert main(["--config", str(config_file), "policy", "check", "--catalog", "shoes"]) == 2
    assert "unknown catalog 'shoes'" in capsys.readouterr().err
