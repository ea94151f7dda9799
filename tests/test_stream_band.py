"""The chain's banded back-substitution (graphs/stream/band.py) against a dense solve of the same conditionals."""

from __future__ import annotations

import numpy as np
import pytest

from mbfg.graphs.stream.band import ConditionalBand


def _dense_back_substitution(G: list[np.ndarray], a: list[np.ndarray], delta_last: np.ndarray) -> np.ndarray:
    """delta_j + G_j delta_j+1 = a_j (j < K - 1), delta_K-1 = delta_last, as one dense system."""
    K, n = len(a) + 1, len(delta_last)
    A = np.eye(K * n)
    rhs = np.concatenate([*a, delta_last])
    for j, G_j in enumerate(G):
        A[j * n : (j + 1) * n, (j + 1) * n : (j + 2) * n] = G_j
    return np.linalg.solve(A, rhs).reshape(K, n)


@pytest.mark.parametrize("n", [1, 4])
def test_the_band_solves_the_stacked_conditionals_across_marginalizations_and_growth(n):
    rng = np.random.default_rng(n)
    band = ConditionalBand(n, capacity=8)  # small: the window moves back to the start and the storage grows
    G: list[np.ndarray] = []
    a: list[np.ndarray] = []
    for _ in range(60):
        # Each update re-eliminates the old frontier with 1-6 new states, as the chain does.
        new = int(rng.integers(1, 7))
        first = len(G)  # the old frontier's position: it gets its conditional now
        G_new = [0.3 * rng.normal(size=(n, n)) for _ in range(new)]
        a_new = [rng.normal(size=n) for _ in range(new)]
        G, a = G + G_new, a + a_new
        band.set(first, np.array(G_new), np.array(a_new))
        delta_last = rng.normal(size=n)
        got = band.solve(len(a) + 1, delta_last)
        np.testing.assert_allclose(got, _dense_back_substitution(G, a, delta_last), rtol=1e-12, atol=1e-12)
        for j, G_j in enumerate(G):  # the covariances read each G back
            np.testing.assert_array_equal(band.G(j), G_j)
        # Marginalize down to a window of about 12 states (every update drops something past the start).
        drop = max(len(a) + 1 - 12, 0)
        band.drop(drop)
        G, a = G[drop:], a[drop:]


def test_a_conditional_set_again_replaces_the_old_one():
    """A relinearization pass eliminates the new states again: their conditionals are overwritten."""
    rng = np.random.default_rng(0)
    band = ConditionalBand(3)
    G = rng.normal(size=(4, 3, 3))
    a = rng.normal(size=(4, 3))
    band.set(0, G, a)
    G[2:], a[2:] = rng.normal(size=(2, 3, 3)), rng.normal(size=(2, 3))
    band.set(2, G[2:], a[2:])
    delta_last = rng.normal(size=3)
    np.testing.assert_allclose(band.solve(5, delta_last), _dense_back_substitution(list(G), list(a), delta_last),
                               rtol=1e-12, atol=1e-12)
