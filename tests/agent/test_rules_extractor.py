from __future__ import annotations

import pytest

from agent_gateway.rules_extractor import extract_by_rules

CASES = [
    (
        "Bonjour, je cherche du chocolat pas cher sans arachide s'il vous plait",
        "chocolat pas cher sans arachide",
    ),
    ("Hi! I'm looking for some cheap chocolate please", "cheap chocolate"),
    ("Salut ! Avez-vous des oranges ?", "oranges"),
    ("Bonjour, j\u2019ai besoin d'oeufs bio svp", "oeufs bio"),
    ("je voudrais de l'huile d'olive, merci", "huile d'olive"),
    ("Could you show me gluten-free pasta under $3, thanks", "gluten-free pasta under $3"),
    ("Hello, do you have any dark chocolate 70%?", "dark chocolate 70%"),
    ("lait 2,5 euros", "lait 2,5 euros"),
    ("oranges", "oranges"),
    ("Good morning! I would like to buy orange juice without sugar please", "orange juice without sugar"),
    ("Hello", ""),
    ("merci beaucoup !", ""),
    ("peut-être du chocolat noir", "chocolat noir"),
    ("Bonjour, peut-etre des oranges", "oranges"),
    # politeness as shoppers type it
    ("Bonjour, je cherche du thé vert bio s il vous plait", "thé vert bio"),
    ("du thé vert bio sil vous plait", "thé vert bio"),
    ("thé vert s'il-vous-plaît, merci d'avance", "thé vert"),
    ("thé vert s\u02bcil te plaît", "thé vert"),
    ("Bjr, du thé vert S.V.P", "thé vert"),
    ("thé vert stp, bonne journée", "thé vert"),
    ("Bonsoir, je vous remercie, du thé vert. Cordialement", "thé vert"),
    ("green tea thx", "green tea"),
    ("green tea, thanks in advance, kind regards", "green tea"),
]


@pytest.mark.parametrize(("message", "intent"), CASES)
def test_rules_extractor_strips_politeness_and_keeps_language(message: str, intent: str) -> None:
    assert extract_by_rules(message) == intent


def test_rules_extractor_keeps_negations_and_qualifiers() -> None:
    # "pas" and "sans" carry meaning; "without" too: none of them is filler.
    assert extract_by_rules("je veux du fromage pas cher sans lactose") == "fromage pas cher sans lactose"
    assert extract_by_rules("I need cookies without nuts") == "cookies without nuts"


def test_redaction_placeholders_are_not_part_of_the_intent() -> None:
    # the guardrails turn e-mails and phone numbers into [email] / [phone] before extraction
    assert extract_by_rules("Bonjour, du chocolat noir svp, [email] ou [phone]") == "chocolat noir ou"
    assert extract_by_rules("[phone] oranges please") == "oranges"
