"""The math verifier: find the final answer in a response and decide whether it equals the ground truth.

Extraction (:func:`extract_answer`). The strict format is DAPO's: the last non-empty line reads
``Answer: <answer>``; a ``\\boxed{...}`` on the last non-empty line is accepted as strict too. Leniently, the
later of the last ``Answer:`` line and the last ``\\boxed{...}`` anywhere in the response is used (then the
format is not ok, but the answer is still scored).

Equivalence (:func:`is_equivalent`):

- Integer ground truth (all of DAPO-Math-17K, AIME and the built-in generator): the answer must be an
  integer literal after light normalisation: wrappers (``$..$``, ``\\(..\\)``, ``\\boxed{}``, ``\\text{}``,
  ``**..**``), a leading ``x =``, a currency sign, trailing ``.``/``,``, ``%``, degree marks and up to two
  unit words are removed; ``042``, ``42.0``, ``+42``, ``1,000`` and ``1{,}000`` are integers; ``4 2``,
  ``84/2`` and ``42.5`` are not. No symbolic algebra runs, so this path takes microseconds and cannot hang
  (integers over ``MAX_INTEGER_DIGITS`` digits are not read as integers).
- Any other ground truth: symbolic equivalence by ``math-verify`` (HuggingFace), under a time bound that works
  in every thread (math-verify's own timeout uses ``SIGALRM`` and so only works in the main thread):

  1. cheap pre-checks reject what would blow up: answers over ``MAX_ANSWER_CHARS`` characters, exponent
     towers (``9^9^9``, ``9^{9^{9}}``, ``9**9**9``), exponents or factorials of ``MAX_LITERAL_DIGITS`` or
     more digits;
  2. the check runs in a child process (:class:`SymbolicWorker`), one per parent process, started on first
     use. The child bounds itself with an interval timer (it runs the check in its own main thread); a
     computation stuck in C (a huge integer power does not return to the interpreter) is ended by the parent,
     which waits at most ``timeout_s`` and then kills the child and starts a fresh one. Either way the answer
     is "not equivalent". Checks from several threads queue on one lock, each bounded on its own.

A (re)started child needs about two seconds to import sympy; that start-up is not counted in ``timeout_s``.
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


def _answer_on_line(line: str) -> str | None:
    """The text after the last ``Answer:`` label on a line (None when there is none or it is empty)."""
    matches = list(_ANSWER_LABEL.finditer(line))
    if not matches:
        return None
    # Markdown bold around the label or the answer ("**Answer:** 42", "Answer: **42**") is not part of it.
    answer = line[matches[-1].end() :].strip().strip("*").strip()
    return answer or None


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
    answer = _answer_on_line(last_line)
    if answer is not None:
        return ExtractedAnswer(answer, strict=True, source="answer_line")
    boxed_on_last = _last_boxed(last_line)
    if boxed_on_last is not None:
        return ExtractedAnswer(boxed_on_last[1], strict=True, source="boxed")

    candidates = []
    for i in range(last_index - 1, -1, -1):
        found = _answer_on_line(lines[i])
        if found is not None:
            candidates.append((sum(len(line) + 1 for line in lines[:i]), found, "answer_line"))
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
    re.compile(r"^\((.*)\)$", re.DOTALL),
)
_PREFIX = re.compile(r"^(?:[A-Za-z]\s*=|\\\$|\$)\s*")
_MARK_SUFFIX = re.compile(r"(?:[.,;]|\\?%|\^\s*\{?\s*\\circ\s*\}?|\N{DEGREE SIGN})$")
_UNIT_SUFFIX = re.compile(r"(?:\s+[A-Za-z]+|\s*\\(?:text|mathrm|mbox)\s*\{\s*[A-Za-z .]*\})$")
_MAX_UNIT_WORDS = 2
_INTEGER = re.compile(rf"^([+-]?)\s*(\d{{1,{MAX_INTEGER_DIGITS}}})(?:\.0+)?$")
_GROUPED_INTEGER = re.compile(r"^[+-]?\s*\d{1,3}(?:,\d{3})+(?:\.0+)?$")


def parse_integer(text: str) -> int | None:
    """The integer an answer states (``"042"``, ``"$42$"``, ``"42 cm"`` -> 42), or None when it is not one."""
    s = text.strip().replace("\N{MINUS SIGN}", "-").replace("{,}", ",").replace("\\,", ",")
    if len(s) > MAX_ANSWER_CHARS:
        return None
    unit_words = 0
    for _ in range(12):  # each pass strips one layer of each kind; twelve covers any realistic nesting
        before = s
        for wrapper in _WRAPPERS:
            match = wrapper.match(s)
            if match:
                s = match.group(1).strip()
        s = _PREFIX.sub("", s)
        s = _MARK_SUFFIX.sub("", s).strip()
        unit = _UNIT_SUFFIX.search(s)
        if unit and unit.start() > 0 and unit_words < _MAX_UNIT_WORDS:
            unit_words += 1
            s = s[: unit.start()].strip()
        if s == before:
            break
    if _GROUPED_INTEGER.match(s):
        s = s.replace(",", "")
    match = _INTEGER.match(s)
    if not match:
        return None
    value = int(match.group(2))
    return -value if match.group(1) == "-" else value


# --------------------------------------------------------------------------------------- symbolic

_TOWER = re.compile(
    r"(?:\^|\*\*)\s*[({]?\s*[\w.\\]+\s*[)}]?\s*(?:\^|\*\*)"  # a^b^c, a^{b}^c, a**b**c
    r"|\^\s*\{[^{}]*(?:\^|\*\*)"  # a^{b^c}
    r"|\*\*\s*\([^()]*(?:\^|\*\*)"  # a**(b**c)
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
    import signal

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


class SymbolicWorker:
    """A child process that runs :func:`symbolic_equal`, killed and replaced when a check overruns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._owner_pid = -1
        self._ready = False
        self._buffer = b""
        self.restarts = 0
        atexit.register(self.close)

    def check(self, pred: str, gold: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
        """Whether ``pred`` and ``gold`` are symbolically equal, False if not known within ``timeout_s``."""
        with self._lock:
            if not self._ensure_ready():
                return False
            request = json.dumps({"pred": pred, "gold": gold, "timeout_s": 0.8 * timeout_s}) + "\n"
            try:
                self._proc.stdin.write(request.encode())
                self._proc.stdin.flush()
            except OSError:
                self._restart()
                return False
            reply = self._read_line(time.monotonic() + timeout_s)
            if reply is None:
                self._restart()
                return False
            return reply == b"1"

    def close(self) -> None:
        """Stop the child (it also stops by itself when this process exits and its stdin closes)."""
        if self._proc is not None and self._owner_pid == os.getpid():
            self._proc.kill()
            self._proc.wait()
            for stream in (self._proc.stdin, self._proc.stdout):
                stream.close()
        self._proc = None

    def _start(self) -> bool:
        root = str(Path(__file__).resolve().parents[1])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        self._ready = False
        self._buffer = b""
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", "from envs.math_equivalence import serve_symbolic_checks as s; s()"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                bufsize=0,
                env=env,
            )
        except OSError as exc:
            message = f"cannot start the math-verify worker ({exc}); symbolic checks answer False"
            warnings.warn(message, stacklevel=4)
            self._proc = None
            return False
        self._owner_pid = os.getpid()
        return True

    def _restart(self) -> None:
        self.close()
        self.restarts += 1
        self._start()  # start the replacement now so that it imports while the caller moves on

    def _ensure_ready(self) -> bool:
        if self._proc is not None and self._owner_pid != os.getpid():  # after a fork the child is not ours
            self._proc = None
        if self._proc is not None and self._proc.poll() is not None:  # it died between checks
            self.close()
        if self._proc is None and not self._start():
            return False
        if self._ready:
            return True
        if self._read_line(time.monotonic() + STARTUP_TIMEOUT_S) == b"ready":
            self._ready = True
            return True
        warnings.warn("the math-verify worker did not start; symbolic checks answer False", stacklevel=4)
        self.close()
        return False

    def _read_line(self, deadline: float) -> bytes | None:
        fd = self._proc.stdout.fileno()
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


_WORKER = SymbolicWorker()


def is_equivalent(pred: str, gold: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    """Whether a predicted answer equals the ground truth (see the module docstring). Never raises."""
    pred, gold = str(pred).strip(), str(gold).strip()
    if not pred or not gold or len(pred) > MAX_ANSWER_CHARS:
        return False
    gold_int = parse_integer(gold)
    if gold_int is not None:
        return parse_integer(pred) == gold_int
    if _strip_dollars(pred) == _strip_dollars(gold):
        return True
    if too_costly(pred) or too_costly(gold):
        return False
    return _WORKER.check(pred, gold, timeout_s)


def score_response(response: str, gold: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    """Whether a whole response's final answer (strict or lenient) equals the ground truth."""
    extracted = extract_answer(response)
    return extracted is not None and is_equivalent(extracted.answer, gold, timeout_s=timeout_s)
