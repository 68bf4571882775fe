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


QUESTIONS = ("What is the capital of France?", "Can you write a haiku about autumn leaves?",
             "hi, how do I sort a list in Python? I tried sorted() but it fails",
             "Tell me a long story about a lighthouse keeper.", "Is there life on Mars?",
             "Explain quantum entanglement simply")
ANSWER_LIKE = ("The answer to this question is Paris", "Paris is the capital of France.",
               "Yes, there is", "Sure! Here is a haiku:", "I am sorry, I cannot help",
               "It is Paris")


def words(text: str) -> set[str]:
    return {w.strip("?.,!:;\"'").lower() for w in text.split()} - {""}


def test_a_title_that_reads_like_an_answer_gives_way_to_the_question_s_own_words():
    """Issue 39: "The answer to this question is Paris" was a title. A title names the
    question: whatever answer-like reply the model gives, the title is a few of the question's
    own words, never a word of the reply the question does not have."""
    from workbench.ui.chat.auto_title import TITLE_WORDS, title_for

    for question in QUESTIONS:
        for reply in ANSWER_LIKE:
            title = title_for(reply, question)
            assert title, (question, reply)
            assert 1 <= len(title.split()) <= TITLE_WORDS, title
            assert words(title) <= words(question), (question, reply, title)
            assert title[0].isupper() and not title.endswith("?"), title
    assert "paris" not in words(title_for(ANSWER_LIKE[0], QUESTIONS[0]))


def test_a_title_that_names_a_topic_is_kept():
    from workbench.ui.chat.auto_title import reads_like_an_answer, title_for

    for reply in ("Capital of France", "Title: French capital city", "Sorting lists in Python",
                  "**Haiku about autumn leaves**", "Life on Mars"):
        assert not reads_like_an_answer(title_for(reply, "x"))
        assert title_for(reply, QUESTIONS[0]) == clean_title(reply)


def test_the_prompt_asks_for_the_topic_not_the_answer():
    prompt = title_prompt("What is the capital of France?", "Paris.")
    assert "Do not answer" in prompt
