"""The divisors of a size, for the "valid values" in fix texts: from its prime factors, never by trying
every number up to it (a world of 10**11 or a head count a hostile config.json gives would take hours).

Miller-Rabin with the first twelve primes as bases is exact below 3.3·10**24; Pollard's rho (Brent)
splits what trial division by small primes leaves. Sizes past 2**64 are not factored (None).
"""

from __future__ import annotations

import math
import random

_SMALL = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)
LIMIT = 1 << 64


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    for p in _SMALL:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in _SMALL:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _rho(n: int) -> int:
    """A non-trivial factor of the composite ``n`` (Pollard's rho, Brent's variant)."""
    if n % 2 == 0:
        return 2
    rng = random.Random(n)
    while True:
        y, c, m = rng.randrange(1, n), rng.randrange(1, n), 128
        g = r = q = 1
        x = ys = y
        while g == 1:
            x = y
            for _ in range(r):
                y = (y * y + c) % n
            k = 0
            while k < r and g == 1:
                ys = y
                for _ in range(min(m, r - k)):
                    y = (y * y + c) % n
                    q = q * abs(x - y) % n
                g = math.gcd(q, n)
                k += m
            r *= 2
        if g == n:
            g = 1
            while g == 1:
                ys = (ys * ys + c) % n
                g = math.gcd(abs(x - ys), n)
        if g != n:
            return g


def factorize(n: int) -> dict[int, int] | None:
    """Prime -> exponent of ``n`` (1 ≤ n < 2**64); None past that."""
    if not 1 <= n < LIMIT:
        return None
    factors: dict[int, int] = {}
    for p in (2, 3, 5, 7, 11, 13):
        while n % p == 0:
            factors[p] = factors.get(p, 0) + 1
            n //= p
    stack = [n] if n > 1 else []
    while stack:
        m = stack.pop()
        if _is_prime(m):
            factors[m] = factors.get(m, 0) + 1
        else:
            f = _rho(m)
            stack += [f, m // f]
    return factors


def divisors(n: int) -> list[int]:
    """Every divisor of ``n``, ascending; [] when ``n`` is not a positive integer below 2**64."""
    factors = factorize(n) if isinstance(n, int) else None
    if factors is None:
        return []
    out = [1]
    for p, e in factors.items():
        out = [d * p**k for d in out for k in range(e + 1)]
    return sorted(out)


def shown(values: list[int], limit: int = 24) -> str:
    """Values for a message: all of them, or the first ``limit`` and how many more."""
    text = ", ".join(map(str, values[:limit]))
    return text if len(values) <= limit else f"{text}, … ({len(values)} in all)"
