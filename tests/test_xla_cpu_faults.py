"""Programs that jaxlib 0.10.2's XLA:CPU computes wrongly or crashes in (its YNN fusion; mbfg._jax turns it off
on the affected releases), each run in a fresh process that imports mbfg first, as a user's would. Without the
guard the first prints a wrong last row and the second dies of a segmentation fault (jax issues 39103, 40412)."""

from __future__ import annotations

import subprocess
import sys

VMAPPED_MATVEC_THEN_SUM = """
import mbfg, jax, jax.numpy as jnp, numpy as np
i = jnp.arange(16_385, dtype=jnp.float64)
x = jnp.stack((i, jnp.zeros_like(i), jnp.zeros_like(i)), axis=1)
f = jax.jit(lambda x: jax.vmap(lambda row: jnp.sum((jnp.eye(3) @ row) ** 2))(x))
wrong = np.flatnonzero(np.asarray(f(x)) != np.arange(16_385.0) ** 2)
print("wrong rows", wrong.tolist())
"""

RANK_7_MULTIPLY_REDUCE = """
import mbfg, jax, jax.numpy as jnp, numpy as np
S = (3, 1, 2, 2, 8, 8, 8)
u = np.random.default_rng(0).standard_normal(S).astype(np.float32)
v = np.random.default_rng(1).standard_normal(S).astype(np.float32)
out = np.asarray(jax.jit(lambda a, b: jnp.sum(a * b, axis=3))(u, v))
print("max error", float(np.max(np.abs(out - np.sum(u * v, axis=3)))))
"""


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    return done.stdout


def test_a_vmapped_matrix_vector_product_then_a_sum_is_exact_in_every_row():
    assert _run(VMAPPED_MATVEC_THEN_SUM).split("\n")[-2] == "wrong rows []"


def test_a_rank_7_multiply_and_reduce_runs_and_matches_numpy():
    error = float(_run(RANK_7_MULTIPLY_REDUCE).split()[-1])
    assert error < 1e-5, error
