from workbench.ui.chat.auto_title import TITLE_CHARS, clean_title, placeholder_title, title_prompt


def test_the_title_is_the_first_line_without_labels_quotes_or_a_full_stop():
    assert clean_title('Title: "Paris, the Capital of France."\nMore text') == (
        "Paris, the Capital of France")
    assert clean_title("\n\n**Rainbow colours**\n") == "Rainbow colours"
    assert clean_title("  subject - Sea   stories ") == "Sea stories"


def test_a_long_title_is_cut_at_a_word():
    title = clean_title("word " * 40)
    assert len(title) <= TITLE_CHARS + 1 and title.endswith("word…")


def test_a_reply_with_nothing_usable_gives_no_title():
    assert clean_title("") == ""
    assert clean_title('"" ...\n***') == ""


def test_the_prompt_quotes_both_turns_and_the_placeholder_is_the_first_message():
    prompt = title_prompt("What is the capital of France?", "Paris.")
    assert "User: What is the capital of France?" in prompt and "Assistant: Paris." in prompt
    assert placeholder_title("  hello\n  world " + "x" * 100) == ("hello world " + "x" * 100)[
        :TITLE_CHARS]
