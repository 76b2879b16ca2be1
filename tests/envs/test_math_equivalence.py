"""The math verifier: answer extraction, a table of equivalence cases, bounded time on pathological input."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.math_equivalence import (
    UNIT_WORDS,
    WORKER_MEMORY_BYTES,
    SymbolicWorker,
    extract_answer,
    integer_expression,
    is_equivalent,
    parse_integer,
    score_response,
    too_costly,
)

# (prediction, ground truth, expected)
INTEGER_CASES = [
    ("42", "42", True),
    ("042", "42", True),
    ("0042", "42", True),
    ("42.0", "42", True),
    ("42.00", "42", True),
    ("42,", "42", True),
    ("42.", "42", True),
    (" 42 ", "42", True),
    ("+42", "42", True),
    ("4 2", "42", False),
    ("-42", "-42", True),
    ("-42", "42", False),
    ("42", "-42", False),
    ("- 42", "-42", True),
    ("\N{MINUS SIGN}42", "-42", True),
    ("0", "0", True),
    ("-0", "0", True),
    ("000", "0", True),
    ("1,000", "1000", True),
    ("1{,}000", "1000", True),
    ("1\\,000", "1000", True),
    ("10,00", "1000", False),
    ("1,2", "12", False),
    ("$42$", "42", True),
    ("$$42$$", "42", True),
    ("\\(42\\)", "42", True),
    ("\\[42\\]", "42", True),
    ("\\boxed{42}", "42", True),
    ("$\\boxed{42}$", "42", True),
    ("\\boxed{042}", "42", True),
    ("\\text{42}", "42", True),
    ("\\textbf{42}", "42", True),
    ("**42**", "42", True),
    ("(42)", "42", True),
    ("x = 42", "42", True),
    ("n=42", "42", True),
    ("\\$42", "42", True),
    ("$42", "42", True),
    ("42\\%", "42", True),
    ("42%", "42", True),
    ("30^\\circ", "30", True),
    ("30^{\\circ}", "30", True),
    ("42 cm", "42", True),
    ("42 \\text{ cm}", "42", True),
    ("42 square units", "42", True),
    ("42 apples and pears", "42", False),
    ("84/2", "42", True),
    ("\\frac{84}{2}", "42", True),
    ("42.5", "42", False),
    ("41.9999", "42", False),
    ("4.2e1", "42", False),
    ("42!", "42", False),
    ("forty-two", "42", False),
    ("42 or 43", "42", False),
    ("0x2A", "42", False),
    ("", "42", False),
    ("None", "42", False),
    ("\\boxed{}", "42", False),
    ("42", "042", True),
    ("42", "42.0", True),
    ("1000", "1,000", True),
    ("1" * 200, "1" * 199, False),
    # Only known unit words are stripped: other trailing words leave no integer.
    ("42 is wrong", "42", False),
    ("42 not", "42", False),
    ("not 42", "42", False),
    ("42 or 43", "42", False),
    ("42 and 43", "42", False),
    ("42 m or 43", "42", False),
    ("42 42", "42", False),
    ("42 (or 43)", "42", False),
    ("42 \\text{ or } 43", "42", False),
    ("42 \\text{ is wrong}", "42", False),
    ("42 maybe", "42", False),
    ("42 cm^2", "42", True),
    ("42 \\text{ square feet}", "42", True),
    ("42 \\mathrm{km}", "42", True),
    ("42 degrees", "42", True),
    ("42 Dollars", "42", True),
    ("42 ways", "42", True),
    ("42 percent", "42", True),
    ("-42 cm", "42", False),
    ("-42%", "42", False),
    # Expressions of integers go through the bounded symbolic check ...
    ("2^{10}", "1024", True),
    ("2^10", "1024", True),
    ("\\dfrac{84}{2}", "42", True),
    ("$\\frac{84}{2}$", "42", True),
    ("\\frac{84}{2} cm", "42", True),
    ("6 \\times 7", "42", True),
    ("6 \\cdot 7", "42", True),
    ("6*7", "42", True),
    ("40 + 2", "42", True),
    ("-(-42)", "42", True),
    ("\\sqrt{1764}", "42", True),
    ("\\binom{7}{2}", "21", True),
    ("7!", "5040", True),
    ("\\frac{85}{2}", "42", False),
    ("2^{10}", "1000", False),
    ("-\\frac{84}{2}", "42", False),
    ("(-6) \\times 7", "42", False),
    # ... but statements, lists, words and split digits never reach it.
    ("41 = 42", "42", False),
    ("x = 41 = 42", "42", False),
    ("42, 43", "42", False),
    ("[42]", "42", False),
    ("\\{42\\}", "42", False),
    ("4 \\cdot 2 2", "42", False),
    ("41.9999999", "42", False),
    ("84/2 is wrong", "42", False),
    ("2^{2^{10}}", "1024", False),
]
SYMBOLIC_CASES = [
    ("\\frac{1}{2}", "\\frac{1}{2}", True),
    ("0.5", "\\frac{1}{2}", True),
    ("1/2", "\\frac{1}{2}", True),
    ("\\dfrac12", "\\frac{1}{2}", True),
    ("\\boxed{\\frac{1}{2}}", "\\frac12", True),
    ("x = \\frac{1}{2}", "\\frac{1}{2}", True),
    ("\\frac{1}{3}", "\\frac{1}{2}", False),
    ("-0.75", "-\\frac{3}{4}", True),
    ("0.75", "-\\frac{3}{4}", False),
    ("1.5", "\\frac{3}{2}", True),
    ("\\sqrt{12}", "2\\sqrt{3}", True),
    ("2\\sqrt{2}", "\\sqrt{8}", True),
    ("\\sqrt{3}/2", "\\frac{\\sqrt{3}}{2}", True),
    ("\\sqrt{2}", "\\sqrt{3}", False),
    ("\\pi/2", "\\frac{\\pi}{2}", True),
    ("3.14159", "\\pi", False),
    ("(1, 2)", "(1,2)", True),
    ("[0,1]", "[0,1)", False),
    ("\\{2,1\\}", "\\{1,2\\}", True),
    ("1+x^2", "x^2+1", True),
    ("x^2-1", "x^2+1", False),
    ("garbage text", "\\frac{1}{2}", False),
    ("9^9^9^9", "\\frac{1}{2}", False),
]


def _case_id(case):
    pred, gold, expected = case
    return f"{pred[:20]!r}-vs-{gold[:12]!r}-{expected}"


def test_table_has_at_least_sixty_cases():
    assert len(INTEGER_CASES) + len(SYMBOLIC_CASES) >= 60


@pytest.mark.parametrize("case", INTEGER_CASES, ids=_case_id)
def test_integer_answers(case):
    pred, gold, expected = case
    assert is_equivalent(pred, gold) is expected


@pytest.mark.parametrize("case", SYMBOLIC_CASES, ids=_case_id)
def test_symbolic_answers(case):
    pred, gold, expected = case
    assert is_equivalent(pred, gold) is expected


@pytest.mark.parametrize(
    ("response", "answer", "strict", "source"),
    [
        ("Let me think.\n7 * 6 = 42.\nAnswer: 42", "42", True, "answer_line"),
        ("Answer: 42\n\n", "42", True, "answer_line"),
        ("**Answer:** 42", "42", True, "answer_line"),
        ("**Answer: 42**", "42", True, "answer_line"),
        ("answer: 42", "42", True, "answer_line"),
        ("So the final answer is $\\boxed{42}$.", "42", True, "boxed"),
        ("\\boxed{41} first, then Answer: 42", "42", True, "answer_line"),
        ("Answer: 42\nI hope this helps.", "42", False, "answer_line"),
        ("Answer: 41\nwait\n\\boxed{42} is right\ndone", "42", False, "boxed"),
        ("\\boxed{41}\nAnswer: 42 is it\nthanks", "42 is it", False, "answer_line"),
        # Lenient: the later of the two on one line, whatever their content ("43" > "42" decided it before).
        ("\\boxed{43} then Answer: 42\nthanks", "42", False, "answer_line"),
        ("x\n\\boxed{9} so Answer: 1\nthanks", "1", False, "answer_line"),
        ("Answer: 1 or \\boxed{9}\nthanks", "9", False, "boxed"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}", True, "boxed"),
        ("\\fbox{7}", "7", True, "boxed"),
    ],
)
def test_extract_answer(response, answer, strict, source):
    extracted = extract_answer(response)
    assert extracted is not None
    assert (extracted.answer, extracted.strict, extracted.source) == (answer, strict, source)


@pytest.mark.parametrize(
    "response", ["", "   \n  ", "The answer is 42", "\\boxed{42", "Answer:", "\\boxed{}"]
)
def test_no_answer_is_none(response):
    assert extract_answer(response) is None


def test_the_answer_with_markdown_bold_still_scores():
    assert score_response("**Answer:** 42", "42")


def test_score_response_uses_the_last_answer():
    assert score_response("Answer: 41\nHmm, no.\nAnswer: 42", "42")
    assert not score_response("Answer: 42\nHmm, no.\nAnswer: 41", "42")
    assert not score_response("no answer here", "42")


PATHOLOGICAL = [
    "9^9^9^9",
    "9^{9^{9^{9}}}",
    "9**9**9**9",
    "9**(9**9)",
    "10^{1000000}",
    "99999999!",
    "x" * 100_000,
    "(" * 100_000,
    "\\frac{" * 50_000,
    "1" * 100_000,
    "\\sqrt{" * 20_000 + "2" + "}" * 20_000,
    "(99999^{99999})^{99999}",
    "((9^9)^9)^9",
]


@pytest.mark.parametrize("gold", ["42", "\\frac{1}{2}"])
@pytest.mark.parametrize("pred", PATHOLOGICAL, ids=lambda p: f"{p[:16]!r}x{len(p)}")
def test_pathological_answers_are_not_equivalent(pred, gold):
    started = time.monotonic()
    assert is_equivalent(pred, gold) is False
    assert time.monotonic() - started < 5, "hang guard"


def test_pre_checks_flag_what_would_blow_up():
    assert all(too_costly(p) for p in PATHOLOGICAL)
    assert not any(too_costly(a) for a in ("x^2+1", "2^{10}", "\\frac{1}{2}", "(x+1)^3", "10!"))


@pytest.mark.parametrize(
    "response",
    [
        "\\boxed{" * 20_000,
        "Answer:" * 20_000,
        "<search>\n" * 20_000,
        ("Answer: 1\n" + "\\boxed{" * 10) * 5_000,
    ],
    ids=["boxes", "labels", "lines", "mixed"],
)
def test_extraction_is_fast_on_adversarial_responses(response):
    started = time.monotonic()
    score_response(response, "42")
    score_response(response, "\\frac{1}{2}")
    assert time.monotonic() - started < 5, "hang guard"


def test_the_unit_list_holds_units_only():
    assert {"cm", "km", "units", "square", "degrees", "dollars", "ways"} <= UNIT_WORDS
    assert not {"is", "not", "or", "and", "wrong", "maybe", "no", "yes"} & UNIT_WORDS


def test_integer_expression_keeps_only_arithmetic_of_integers():
    assert integer_expression("$\\frac{84}{2}$ cm") == "\\frac{84}{2}"
    assert integer_expression("2^{10}") == "2^{10}"
    for answer in ("42 or 43", "41 = 42", "4 2", "42, 43", "1.5 * 28", "x^2", "\\pi", "forty-two", ""):
        assert integer_expression(answer) is None, answer


@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        ("10,\\!000", "10000"),
        ("1,\\!000,\\!000", "1000000"),
        ("42\\ \\text{cm}", "42"),
        ("42\\;\\text{cm}", "42"),
    ],
)
def test_latex_spacing_is_not_part_of_an_integer(pred, gold):
    # MATH writes 10000 as "10,\!000"; DAPO's (Minerva's) normalisation drops "\!", "\ " and "\;".
    assert parse_integer(pred) == int(gold)
    assert is_equivalent(pred, gold)


@pytest.mark.parametrize(
    ("pred", "gold"),
    [("(1+2)(3+4)", "21"), ("(1)+(2)", "3"), ("(2+3)\\cdot(4+5)", "45"), ("{2}^{10}", "1024")],
)
def test_brackets_that_open_and_close_apart_are_no_wrapper(pred, gold):
    # "(1+2)(3+4)" starts with "(" and ends with ")", but stripping them left "1+2)(3+4", never equal.
    assert integer_expression(pred) == pred
    assert is_equivalent(pred, gold)


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [
        ("3100", "(3,100)", False),
        ("(3,100)", "3100", False),
        ("(3, 100)", "(3,100)", True),
        ("(42)", "42", True),
    ],
)
def test_a_pair_or_interval_is_no_integer(pred, gold, expected):
    # Stripping the parentheses of "(3,100)" read the interval as the grouped integer 3,100.
    assert is_equivalent(pred, gold) is expected


def test_a_text_wrapper_followed_by_a_unit_in_text():
    assert parse_integer("\\text{42}\\text{ cm}") == 42


def test_worker_kills_a_stuck_check_from_a_non_main_thread():
    """The backstop behind the pre-checks: 9^(9^9) is computed in C and never returns to the interpreter."""
    worker = SymbolicWorker()
    try:
        assert worker.check("1/2", "0.5")  # start the worker before timing anything
        result = {}

        def stuck_check():
            started = time.monotonic()
            result["equal"] = worker.check("9^{9^{9}}", "1/2", timeout_s=1.0)
            result["elapsed"] = time.monotonic() - started

        thread = threading.Thread(target=stuck_check)
        thread.start()
        thread.join(timeout=30)
        assert not thread.is_alive()
        assert result["equal"] is False
        assert result["elapsed"] < 5, "hang guard"
        assert worker.restarts == 1
        assert worker.check("\\sqrt{12}", "2\\sqrt{3}")  # the replacement worker answers
    finally:
        worker.close()


def test_a_warm_spare_replaces_a_killed_worker():
    """After a kill the next check goes to the spare started beside the first child (it has been importing
    sympy since then), not to a child started only now; and a new spare is started at once."""
    worker = SymbolicWorker()
    patient = 30.0  # the ordinary calls' timeout: on a loaded machine a first sympy call can take over 1 s
    try:
        assert worker.check("1/2", "0.5", timeout_s=patient)
        first, spare = worker.pid, worker.spare_pid
        assert spare is not None and spare != first
        assert worker.check("9^{9^{9}}", "1/2", timeout_s=0.5) is False  # stuck in C: killed
        assert worker.restarts == 1
        assert worker.pid == spare  # the spare was swapped in ...
        assert worker.spare_pid not in (None, first, spare)  # ... and a new spare is on its way
        # The next ordinary call answers, and correctly.
        assert worker.check("\\frac{84}{2}", "42", timeout_s=patient)
        assert worker.pid == spare and worker.restarts == 1
    finally:
        worker.close()
    assert worker.pid is None and worker.spare_pid is None


def test_the_worker_cannot_fill_the_machine_memory():
    """The backstop behind the pre-checks for size: the child's address space is capped."""
    worker = SymbolicWorker()
    try:
        assert worker.check("1/2", "0.5")
        limits = Path(f"/proc/{worker.pid}/limits").read_text()
        (line,) = [line for line in limits.splitlines() if line.startswith("Max address space")]
        assert line.split()[3:5] == [str(WORKER_MEMORY_BYTES)] * 2
    finally:
        worker.close()


def test_checks_from_many_threads():
    preds = ["0.5", "1/2", "\\frac{2}{4}", "0.25", "9^9^9", "x" * 10_000] * 4
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda p: is_equivalent(p, "\\frac{1}{2}"), preds))
    assert results == [True, True, True, False, False, False] * 4


@given(st.integers(min_value=-(10**30), max_value=10**30))
def test_integers_round_trip(n):
    assert parse_integer(str(n)) == n
    assert parse_integer(f"{n:,}") == n
    assert parse_integer(f"$\\boxed{{{n}}}$") == n
    assert is_equivalent(f"{n}.0", str(n))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_never_raises_on_arbitrary_text(text):
    assert is_equivalent(text, "42") in (True, False)
    assert score_response(text, "17") in (True, False)
    extract_answer(text)
