from wordcount import count


def test_counts_words():
    assert count("one two  three\nfour") == 4
    assert count("") == 0
