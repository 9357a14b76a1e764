"""The fast override path against Hydra's own parser: on generated override strings, whenever the fast path
answers, Hydra parses the same string to the same kind, key and value (type included); otherwise the fast
path defers (returns None) and Hydra decides.

`SHARDCHECK_OVERRIDE_CASES` sets the number of strings (default 5,000; the full run is 100,000:
`SHARDCHECK_OVERRIDE_CASES=100000 pytest tests/test_hydra_fast_differential.py -s`).
"""

from __future__ import annotations

import math
import os
import random

from shardcheck.inputs.hydra_fast import fast_override

CASES = int(os.environ.get("SHARDCHECK_OVERRIDE_CASES", "5000"))

_KEY_PARTS = [
    "a",
    "trainer",
    "nnodes",
    "actor_rollout_ref",
    "tensor_model_parallel_size",
    "x-y",
    "_p",
    "A9",
    "9a",
    "$v",
    "a@b",
    "a/b",
    "",
    "0",
    "1",
    "é",
    "a b",
    "-k",
]
_VALUE_PARTS = [
    "1",
    "0",
    "01",
    "10",
    "1_0",
    "1__0",
    "1_",
    "-3",
    "+2",
    "+2.5",
    "-0.5",
    "1e-6",
    "1E+3",
    "1e",
    "2.",
    ".5",
    "5.e3",
    "1_0.2_5",
    "inf",
    "-inf",
    "NaN",
    "nAn",
    "Infinity",
    "true",
    "False",
    "TRUE",
    "truex",
    "null",
    "NULL",
    "nullx",
    "none",
    "vllm",
    "sglang",
    "Qwen/Qwen3-8B",
    "x-y",
    "_z",
    "a_b",
    "/",
    "-",
    "+",
    ".",
    ":",
    "%",
    "*",
    "@",
    "?",
    "|",
    "$",
    "\\",
    " ",
    "'",
    '"',
    "[",
    "]",
    "{",
    "}",
    ",",
    "(",
    ")",
    "=",
    "~",
    "#",
    "${a.b}",
    "é",
    "\t",
    "!",
    "&",
    "^",
    "<",
    ">",
    ";",
    "`",
]


def _generate(rng: random.Random) -> str:
    prefix = rng.choices(["", "+", "++", "~", "+++"], weights=[70, 12, 10, 4, 4])[0]
    key = ".".join(rng.choice(_KEY_PARTS[:8] if rng.random() < 0.8 else _KEY_PARTS) for _ in range(rng.randint(1, 4)))
    eq = rng.choices(["=", "", "==", "= "], weights=[90, 3, 4, 3])[0]
    pool = _VALUE_PARTS[:37] if rng.random() < 0.6 else _VALUE_PARTS
    roll = rng.random()
    if roll < 0.15:  # a quoted string
        quote = rng.choice("'\"")
        value = quote + _fragment(rng, pool) + rng.choice([quote, quote, quote, "", "'\""]) + _fragment(rng, pool, 0)
    elif roll < 0.35:  # a list of primitives and quoted strings
        items = [
            _fragment(rng, pool) if rng.random() < 0.6 else f"'{_fragment(rng, pool)}'"
            for _ in range(rng.choice([0, 1, 2, 3, 5]))
        ]
        sep = rng.choice([",", ", ", " ,", ",,", " "])
        value = rng.choice(["[", "[ ", "[["]) + sep.join(items) + rng.choice(["]", " ]", "]]", ""])
    else:
        value = _fragment(rng, pool)
    if rng.random() < 0.05:
        value = rng.choice([" ", "\t"]) + value
    return f"{prefix}{key}{eq}{value}"


def _fragment(rng: random.Random, pool: list[str], least: int = 0) -> str:
    count = rng.choices([0, 1, 2, 3, 4], weights=[3, 50, 25, 15, 7])[0]
    return "".join(rng.choice(pool) for _ in range(max(count, least)))


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def test_fast_override_agrees_with_hydra():
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    rng = random.Random(20261203)
    answered = 0
    typed: dict[str, int] = {}
    for _ in range(CASES):
        text = _generate(rng)
        fast = fast_override(text)
        if fast is None:
            continue
        answered += 1
        try:
            (parsed,) = parser.parse_overrides([text])
        except HydraException as exc:
            raise AssertionError(f"fast path answered {fast!r} for {text!r}; Hydra rejects it: {exc}") from None
        hydra = (parsed.type.name.lower(), parsed.key_or_group, parsed.value())
        assert fast[:2] == hydra[:2] and (isinstance(fast[2], list) or _same(fast[2], hydra[2])), (text, fast, hydra)
        typed[type(fast[2]).__name__] = typed.get(type(fast[2]).__name__, 0) + 1
        if isinstance(fast[2], list):
            assert (
                isinstance(hydra[2], list) and len(fast[2]) == len(hydra[2]) and all(map(_same, fast[2], hydra[2]))
            ), (text, fast, hydra)
    print(
        f"\n{CASES} generated overrides: the fast path answered {answered}, agreeing with Hydra on all; "
        f"by type {dict(sorted(typed.items()))}; the rest went to Hydra"
    )
    # the generator reaches every kind of value the fast path gives, and a good share of all strings
    assert answered >= CASES * 0.25 and set(typed) == {"int", "float", "bool", "NoneType", "str", "list"}
