"""The math verifier: find the final answer in a response and decide whether it equals the ground truth.

Extraction (:func:`extract_answer`). The strict format is DAPO's: the last non-empty line reads
``Answer: <answer>``; a ``\\boxed{...}`` on the last non-empty line is accepted as strict too. Leniently, the
later of the last ``Answer:`` line and the last ``\\boxed{...}`` anywhere in the response is used (then the
format is not ok, but the answer is still scored).

Equivalence (:func:`is_equivalent`):

- Integer ground truth (all of DAPO-Math-17K, AIME and the built-in generator): after light normalisation
  (wrappers ``$..$``, ``\\(..\\)``, ``\\boxed{}``, ``\\text{}``, ``**..**``, ``(..)``, each only around the
  whole answer, and parentheses not around a comma: ``(3,100)`` is a pair or an interval; LaTeX spacing
  ``\\!``, ``\\ ``, ``\\;``, ``\\:``; a leading ``x =``; a currency sign; trailing ``.``/``,``, ``%``, degree
  marks and up to two words of :data:`UNIT_WORDS`) an integer literal is compared exactly: ``042``, ``42.0``,
  ``+42``, ``1,000``, ``1{,}000`` and ``1,\\!000`` are 42 or 1000, ``-42`` is not 42, and a trailing word
  that is not a unit (``42 is wrong``, ``42 not``) leaves no integer. An answer that is not a literal but an
  expression of integers (digits, ``+ - * / ^ ( ) { } !``, ``\\frac``, ``\\cdot``, ``\\times``, ``\\sqrt``,
  ``\\binom``; no words, ``=``, commas, decimal points or digits split by spaces) goes through the bounded
  symbolic check below, so ``\\frac{84}{2}`` and ``2^{10}`` count; anything else (``42 or 43``, ``4 2``,
  ``41 = 42``) is not equivalent without running the check.
- Any other ground truth: symbolic equivalence by ``math-verify`` (HuggingFace), under a time bound that works
  in every thread (math-verify's own timeout uses ``SIGALRM`` and so only works in the main thread):

  1. cheap pre-checks reject what would blow up: answers over ``MAX_ANSWER_CHARS`` characters, exponent
     towers (``9^9^9``, ``9^{9^{9}}``, ``9**9**9``, ``(9^9)^9``), exponents or factorials of
     ``MAX_LITERAL_DIGITS`` or more digits; and the child's address space is capped at
     ``WORKER_MEMORY_BYTES``, so what gets past them fails to allocate rather than fill the machine;
  2. the check runs in a child process (:class:`SymbolicWorker`), started on first use together with a warm
     spare. The child bounds itself with an interval timer (it runs the check in its own main thread); a
     computation stuck in C (a huge integer power does not return to the interpreter) is ended by the parent,
     which waits at most ``timeout_s``, kills the child, swaps the spare in and starts a new spare. Either way
     the answer is "not equivalent". Checks from several threads queue on one lock, each bounded on its own.

A child needs about two seconds to import sympy; that start-up is not counted in ``timeout_s``. The spare
imports while the active child works, so the call after a kill does not wait for it (unless two kills
come within one start-up time).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import select
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

MAX_ANSWER_CHARS = 500
MAX_LITERAL_DIGITS = 6
MAX_INTEGER_DIGITS = 1000
STARTUP_TIMEOUT_S = 60.0
DEFAULT_TIMEOUT_S = 1.0
# Address space a checking child may use (it needs about 250 MB): a huge integer that the pre-checks let
# through fails to allocate instead of filling the machine's memory within the time bound.
WORKER_MEMORY_BYTES = 2 * 1024**3

# --------------------------------------------------------------------------------------- extraction

_ANSWER_LABEL = re.compile(r"answer\s*:", re.IGNORECASE)
_BOX_COMMANDS = ("\\boxed", "\\fbox")


@dataclass(frozen=True)
class ExtractedAnswer:
    """The final answer found in a response.

    ``strict``: it came from the last non-empty line, as ``Answer: ...`` or ``\\boxed{...}``.
    ``source``: ``"answer_line"`` or ``"boxed"``.
    """

    answer: str
    strict: bool
    source: str


def _answer_on_line(line: str) -> tuple[int, str] | None:
    """Position of the last ``Answer:`` label on a line and the text after it (None when none or empty)."""
    matches = list(_ANSWER_LABEL.finditer(line))
    if not matches:
        return None
    # Markdown bold around the label or the answer ("**Answer:** 42", "Answer: **42**") is not part of it.
    answer = line[matches[-1].end() :].strip().strip("*").strip()
    return (matches[-1].start(), answer) if answer else None


def _last_boxed(text: str) -> tuple[int, str] | None:
    """Position and content of the last ``\\boxed{...}`` (or ``\\fbox{...}``), None unless its braces close.

    Only the last one is tried, so a response full of unclosed boxes costs one linear scan.
    """
    start, command = max((text.rfind(c), c) for c in _BOX_COMMANDS)
    if start < 0:
        return None
    i = start + len(command)
    while i < len(text) and text[i] == " ":
        i += 1
    if i >= len(text) or text[i] != "{":
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                content = text[i + 1 : j].strip()
                return (start, content) if content else None
    return None


def extract_answer(response: str) -> ExtractedAnswer | None:
    """The final answer of a response, or None when it gives none (see the module docstring)."""
    lines = response.split("\n")
    last_index = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].strip()), None)
    if last_index is None:
        return None
    last_line = lines[last_index]
    labelled = _answer_on_line(last_line)
    if labelled is not None:
        return ExtractedAnswer(labelled[1], strict=True, source="answer_line")
    boxed_on_last = _last_boxed(last_line)
    if boxed_on_last is not None:
        return ExtractedAnswer(boxed_on_last[1], strict=True, source="boxed")

    candidates = []
    for i in range(last_index - 1, -1, -1):
        found = _answer_on_line(lines[i])
        if found is not None:
            # The label's own position, not its line's: "\\boxed{43} then Answer: 42" answers 42.
            position = sum(len(line) + 1 for line in lines[:i]) + found[0]
            candidates.append((position, found[1], "answer_line"))
            break
    boxed = _last_boxed(response)
    if boxed is not None:
        candidates.append((*boxed, "boxed"))
    if not candidates:
        return None
    _, answer, source = max(candidates)
    return ExtractedAnswer(answer, strict=False, source=source)


# --------------------------------------------------------------------------------------- integers

_WRAPPERS = (
    re.compile(r"^\$+(.*?)\$+$", re.DOTALL),
    re.compile(r"^\\\((.*)\\\)$", re.DOTALL),
    re.compile(r"^\\\[(.*)\\\]$", re.DOTALL),
    re.compile(r"^\\(?:boxed|fbox|text|textbf|mathbf|mathrm|mbox)\s*\{(.*)\}$", re.DOTALL),
    re.compile(r"^\*\*(.*)\*\*$", re.DOTALL),
    re.compile(r"^[*`](.*)[*`]$", re.DOTALL),
    re.compile(r"^\{(.*)\}$", re.DOTALL),
)
# Parentheses wrap an answer unless it has a comma: "(3,100)" is a pair or an interval, not 3100.
_PARENTHESES = re.compile(r"^\(([^,]*)\)$", re.DOTALL)
# A leading "x =", or a currency sign: "\$" or a "$" that no later "$" closes as math.
_PREFIX = re.compile(r"^(?:[A-Za-z]\s*=|\\\$|\$(?!.*\$))\s*", re.DOTALL)
_MARK_SUFFIX = re.compile(r"(?:[.,;]|\\?%|\^\s*\{?\s*\\circ\s*\}?|\N{DEGREE SIGN})$")

# Words stripped after a number: the unit and count words of Minerva's answer normalisation (Lewkowycz et
# al., 2022, appendix D; DAPO's verifier in verl uses it), with singulars and the common SI
# and imperial units of competition problems. Only these: any other trailing word ("42 is wrong", "42 not")
# leaves the answer unreadable as an integer.
_UNITS_BY_KIND = {
    "count and area (Minerva)": "unit units square squared cubic sq way ways integer integers digit digits "
    "point points multiple multiples student students edge edges",
    "angle and share": "degree degrees deg percent",
    "length and speed": "mm cm m km millimeter millimeters centimeter centimeters meter meters metre metres "
    "kilometer kilometers in inch inches ft foot feet yd yard yards mi mile miles mph kph",
    "time": "s sec secs second seconds min mins minute minutes h hr hrs hour hours day days week weeks "
    "month months year years",
    "mass": "g gm gram grams kg kilogram kilograms lb lbs pound pounds oz ounce ounces ton tons",
    "volume": "l ml liter liters litre litres gallon gallons cup cups",
    "money": "dollar dollars cent cents",
}
UNIT_WORDS = frozenset(word for words in _UNITS_BY_KIND.values() for word in words.split())
_MAX_UNIT_WORDS = 2
_UNIT_SUFFIX = re.compile(
    r"(?:\s+([A-Za-z]+)(?:\^\{?[23]\}?)?|\s*\\(?:text|mathrm|mbox)\s*\{([A-Za-z .]*)\}(?:\^\{?[23]\}?)?)$"
)
_INTEGER = re.compile(rf"^([+-]?)\s*(\d{{1,{MAX_INTEGER_DIGITS}}})(?:\.0+)?$")
_GROUPED_INTEGER = re.compile(r"^[+-]?\s*\d{1,3}(?:,\d{3})+(?:\.0+)?$")
# An expression of integers that the symbolic check may evaluate for an integer ground truth: these commands,
# digits, arithmetic and grouping only.
_EXPRESSION_COMMANDS = re.compile(r"\\(?:[dt]?frac|cdot|times|div|sqrt|[dt]?binom|left|right)(?![A-Za-z])")
_EXPRESSION = re.compile(r"^[\d\s+\-*/^(){}!]+$")
_SPLIT_DIGITS = re.compile(r"\d\s+\d")


def _unit_words(match: re.Match) -> list[str] | None:
    """The unit words a trailing match strips (``[]`` for an empty ``\\text{}``), None if one is no unit."""
    words = (match.group(1) or match.group(2).replace(".", " ")).lower().split()
    return words if all(w in UNIT_WORDS for w in words) else None


def _balanced(text: str) -> bool:
    """Whether every ``(`` and ``{`` of ``text`` closes and nothing closes that did not open."""
    for opening, closing in ("()", "{}"):
        depth = 0
        for ch in text:
            depth += (ch == opening) - (ch == closing)
            if depth < 0:
                return False
        if depth:
            return False
    return True


def bare_answer(text: str) -> str:
    """An answer without its wrappers, prefix, trailing marks and units (``"$x = 42$ cm"`` -> ``"42"``)."""
    s = text.strip().replace("\N{MINUS SIGN}", "-").replace("{,}", ",").replace("\\,", ",")
    # LaTeX spacing: "10,\!000" is MATH's way of writing 10000, "42\ \text{cm}" a number and its unit.
    s = s.replace("\\!", "").replace("\\ ", " ").replace("\\;", " ").replace("\\:", " ")
    unit_words = 0
    for _ in range(12):  # each pass strips one layer of each kind; twelve covers any realistic nesting
        before = s
        for wrapper in (*_WRAPPERS, _PARENTHESES):
            match = wrapper.match(s)
            # Only a wrapper around the whole answer: "(6)(7)" starts and ends with parentheses, not in one.
            if match and _balanced(match.group(1)):
                s = match.group(1).strip()
        s = _PREFIX.sub("", s)
        s = _MARK_SUFFIX.sub("", s).strip()
        unit = _UNIT_SUFFIX.search(s)
        words = _unit_words(unit) if unit and unit.start() > 0 else None
        if words is not None and unit_words + len(words) <= _MAX_UNIT_WORDS:
            unit_words += len(words)
            s = s[: unit.start()].strip()
        if s == before:
            break
    return s


def parse_integer(text: str) -> int | None:
    """The integer an answer states (``"042"``, ``"$42$"``, ``"42 cm"`` -> 42), or None when it is not one."""
    if len(text) > MAX_ANSWER_CHARS:
        return None
    s = bare_answer(text)
    if _GROUPED_INTEGER.match(s):
        s = s.replace(",", "")
    match = _INTEGER.match(s)
    if not match:
        return None
    value = int(match.group(2))
    return -value if match.group(1) == "-" else value


def integer_expression(text: str) -> str | None:
    """The normalised answer if it is an expression of integers (``\\frac{84}{2}``, ``2^{10}``), else None."""
    if len(text) > MAX_ANSWER_CHARS:
        return None
    s = bare_answer(text)
    if not any(ch.isdigit() for ch in s) or _SPLIT_DIGITS.search(s):
        return None
    return s if _EXPRESSION.match(_EXPRESSION_COMMANDS.sub("", s)) else None


# --------------------------------------------------------------------------------------- symbolic

_TOWER = re.compile(
    r"(?:\^|\*\*)\s*[({]?\s*[\w.\\]+\s*[)}]?\s*(?:\^|\*\*)"  # a^b^c, a^{b}^c, a**b**c
    r"|\^\s*\{[^{}]*(?:\^|\*\*)"  # a^{b^c}
    r"|\*\*\s*\([^()]*(?:\^|\*\*)"  # a**(b**c)
    r"|(?:\^|\*\*)[^()]*\)\s*(?:\^|\*\*)"  # (a^b)^c
)
_BIG_LITERAL = re.compile(
    rf"(?:\^|\*\*)\s*[({{]?\s*\d{{{MAX_LITERAL_DIGITS},}}|\d{{{MAX_LITERAL_DIGITS},}}\s*!"
)


def too_costly(answer: str) -> bool:
    """True for answers the symbolic check refuses outright (too long, exponent towers, huge literals)."""
    return len(answer) > MAX_ANSWER_CHARS or bool(_TOWER.search(answer) or _BIG_LITERAL.search(answer))


def _strip_dollars(text: str) -> str:
    return text.strip().strip("$").strip()


def symbolic_equal(pred: str, gold: str) -> bool:
    """math-verify's verdict with its signal timeouts off: unbounded, so it runs only in the child process."""
    from math_verify import parse, verify

    gold_parsed = parse(f"${_strip_dollars(gold)}$", parsing_timeout=None)
    pred_parsed = parse(f"${_strip_dollars(pred)}$", parsing_timeout=None)
    if not gold_parsed or not pred_parsed:
        return False
    return bool(verify(gold_parsed, pred_parsed, timeout_seconds=None))


def serve_symbolic_checks() -> None:
    """The child's loop: one JSON request per stdin line, ``1`` or ``0`` per stdout line."""
    import logging
    import resource
    import signal

    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    logging.disable(logging.WARNING)  # math-verify warns that its timeouts are off; the bound is ours

    def on_timer(signum, frame):
        raise TimeoutError

    signal.signal(signal.SIGALRM, on_timer)
    symbolic_equal("1", "1")  # import sympy and math-verify before announcing readiness
    out = sys.stdout.buffer
    out.write(b"ready\n")
    out.flush()
    for line in sys.stdin.buffer:
        equal = False
        try:
            request = json.loads(line)
            signal.setitimer(signal.ITIMER_REAL, request["timeout_s"])
            equal = symbolic_equal(request["pred"], request["gold"])
        except Exception:  # TimeoutError from the timer, or any failure inside the parser: not equivalent
            equal = False
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        out.write(b"1\n" if equal else b"0\n")
        out.flush()


class _Child:
    """One worker process, with what it has written and not yet been read."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.owner_pid = os.getpid()
        self.ready = False
        self._buffer = b""

    @classmethod
    def start(cls) -> _Child | None:
        root = str(Path(__file__).resolve().parents[1])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", "from envs.math_equivalence import serve_symbolic_checks as s; s()"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                bufsize=0,
                env=env,
            )
        except OSError as exc:
            message = f"cannot start the math-verify worker ({exc}); symbolic checks answer False"
            warnings.warn(message, stacklevel=5)
            return None
        return cls(proc)

    def usable(self) -> bool:
        """Started by this process (not inherited through a fork) and still running."""
        return self.owner_pid == os.getpid() and self.proc.poll() is None

    def wait_ready(self) -> bool:
        if not self.ready:
            self.ready = self.read_line(time.monotonic() + STARTUP_TIMEOUT_S) == b"ready"
        return self.ready

    def ask(self, request: bytes, deadline: float) -> bytes | None:
        try:
            self.proc.stdin.write(request)
            self.proc.stdin.flush()
        except OSError:
            return None
        return self.read_line(deadline)

    def read_line(self, deadline: float) -> bytes | None:
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            readable, _, _ = select.select([fd], [], [], remaining)
            if not readable:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:  # the child died
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.strip()

    def kill(self) -> None:
        if self.owner_pid == os.getpid():
            self.proc.kill()
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                stream.close()


class SymbolicWorker:
    """A child process that runs :func:`symbolic_equal`, and a warm spare that replaces it when a check
    overruns (the spare imports sympy while the active child works, so the next check need not wait)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: _Child | None = None
        self._spare: _Child | None = None
        self.restarts = 0
        atexit.register(self.close)

    @property
    def pid(self) -> int | None:
        """The process id of the child that answers the next check (None before the first)."""
        return self._active.proc.pid if self._active is not None else None

    @property
    def spare_pid(self) -> int | None:
        """The process id of the spare that replaces the active child after a kill."""
        return self._spare.proc.pid if self._spare is not None else None

    def check(self, pred: str, gold: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
        """Whether ``pred`` and ``gold`` are symbolically equal, False if not known within ``timeout_s``."""
        with self._lock:
            if not self._ensure_ready():
                return False
            request = json.dumps({"pred": pred, "gold": gold, "timeout_s": 0.8 * timeout_s}) + "\n"
            reply = self._active.ask(request.encode(), time.monotonic() + timeout_s)
            if reply is None:
                self._replace_active()
                return False
            return reply == b"1"

    def close(self) -> None:
        """Stop the children (they also stop by themselves when this process exits and their stdin closes)."""
        for child in (self._active, self._spare):
            if child is not None:
                child.kill()
        self._active = self._spare = None

    def _replace_active(self) -> None:
        self._active.kill()
        self.restarts += 1
        self._active, self._spare = self._spare, _Child.start()

    def _ensure_ready(self) -> bool:
        for name in ("_active", "_spare"):  # drop children inherited through a fork, or that died
            child = getattr(self, name)
            if child is not None and not child.usable():
                child.kill()
                setattr(self, name, None)
        if self._active is None:
            self._active, self._spare = self._spare or _Child.start(), None
        if self._spare is None:
            self._spare = _Child.start()
        if self._active is None:
            return False
        if self._active.wait_ready():
            return True
        warnings.warn("the math-verify worker did not start; symbolic checks answer False", stacklevel=4)
        self._active.kill()
        self._active = None
        return False


_WORKER = SymbolicWorker()


def is_equivalent(pred: str, gold: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    """Whether a predicted answer equals the ground truth (see the module docstring). Never raises."""
    pred, gold = str(pred).strip(), str(gold).strip()
    if not pred or not gold or len(pred) > MAX_ANSWER_CHARS:
        return False
    gold_int = parse_integer(gold)
    if gold_int is not None:
        pred_int = parse_integer(pred)
        if pred_int is not None:
            return pred_int == gold_int
        expression = integer_expression(pred)
        if expression is None or too_costly(expression):
            return False
        return _WORKER.check(expression, str(gold_int), timeout_s)
    if _strip_dollars(pred) == _strip_dollars(gold):
        return True
    if too_costly(pred) or too_costly(gold):
        return False
    return _WORKER.check(pred, gold, timeout_s)


def score_response(response: str, gold: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    """Whether a whole response's final answer (strict or lenient) equals the ground truth."""
    extracted = extract_answer(response)
    return extracted is not None and is_equivalent(extracted.answer, gold, timeout_s=timeout_s)
