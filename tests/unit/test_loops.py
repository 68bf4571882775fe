"""The loop detector the everyday evaluation judges answers with (tests/loops.py)."""

from __future__ import annotations

import pytest

from tests.loops import loop_found, repeated_line, repeated_run, words


def test_a_phrase_said_over_and_over_is_a_loop():
    haiku = "A lone soul, a lone soul, a lone soul, a lone soul, a lone soul"
    assert "a lone soul" in loop_found(haiku, n=6)
    assert loop_found("soul " * 20, n=4)


def test_one_sentence_repeated_to_the_limit_is_a_loop():
    story = "The cat sat by the door and waited. " * 4
    assert "the cat sat by the door" in loop_found(story, n=6)


def test_a_repeated_line_is_a_loop_even_when_its_runs_are_short():
    assert loop_found("Boil an egg:\n\nBoil an egg:\n\nBoil an egg:").startswith(
        "line 'boil an egg'")
    assert loop_found("Frogs\nFrogs\nFrogs") == "line 'frogs' × 3"


def test_a_numbered_list_that_repeats_one_item_is_a_loop():
    listed = "1. Lions\n2. Tigers\n3. Frogs\n4. Frogs\n5. Frogs\n6. Frogs\n7. Frogs\n8. Frogs"
    assert loop_found(listed, n=6) == "line 'frogs' × 6"
    assert loop_found("- Frogs\n- Frogs\n* Frogs", n=6) == "line 'frogs' × 3"
    assert loop_found("1. Lions\n2. Tigers\n3. Frogs\n4. Bears", n=6) == ""


def test_text_that_moves_on_is_not_a_loop():
    story = ("Once upon a time a cat found a key under the old oak tree. She carried it home, "
             "tried every door in the house, and at last it opened the attic, where a box of "
             "letters waited. The cat read none of them, but she slept on them all winter.")
    assert loop_found(story, n=6) == ""
    assert loop_found("1. Lion\n2. Tiger\n3. Bear\n4. Wolf") == ""
    assert loop_found("") == ""


def test_a_phrase_twice_is_not_a_loop_but_three_times_is():
    twice = "we go to the sea. Then we go to the sea."
    assert loop_found(twice, n=4) == ""
    assert loop_found(twice + " And we go to the sea.", n=4)


def test_case_and_punctuation_do_not_hide_a_loop():
    assert words("Soul, SOUL; soul!") == ["soul", "soul", "soul"]
    assert loop_found("A lone Soul. a lone soul! A LONE SOUL, a lone soul", n=3)


def test_the_parts():
    assert repeated_run(words("a b a b a b"), 2) == (("a", "b"), 3)
    assert repeated_run([], 3) == ((), 0)
    assert repeated_line("x y\nz\n1. x  y!\n") == ("x y", 2)
    with pytest.raises(ValueError):
        loop_found("x", n=0)
