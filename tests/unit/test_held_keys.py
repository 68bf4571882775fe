from workbench.cli.held_keys import typed_line


def test_held_keys_become_the_line_they_would_have_typed():
    assert typed_line("/helx\x7fp") == "/help"
    assert typed_line("abc\x15de") == "de"  # Ctrl-U clears
    assert typed_line("hi\x1b[A\x1bOB there\r\n") == "hi there"  # arrows and Enter dropped
    assert typed_line("\x7f\x7f") == ""
