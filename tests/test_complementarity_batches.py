"""The complementarity rows as batches of friction groups: a traced program that does not grow with them.

The rows of dry joints (Marklund, Servin, Larson 2025, App. F.4), load-independent Coulomb bounds with
Stribeck's term (eq. 4.1) and contacts (eqs. 2.21, 2.24) are built for all groups of a kind in one vectorized
expression, and the closed-form multipliers of inverse dynamics (eq. 2.31) solved likewise: the traced impulse
residual (eqs. 3.6-3.7) with its forward Jacobian has the same number of equations for six frictional hinges
and six contacts as for one of each (a structural check on the jaxpr, not a timing). The batched multipliers
are checked against Lemke's method in ``test_complementarity.py``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from mbfg import complementarity, residuals
from mbfg._jax import jax, jnp
from mbfg._programs import jaxpr_equation_count
from mbfg.rigid import Contact
from mbfg.testing import chain_urdf
from mbfg.urdf import urdf_from_string


def _frictional_chain(n: int):
    """n hinged links (revolute about y, 0.3 m apart): even joints with load-dependent dry friction, Stribeck's
    term and a Coulomb bound, odd joints with a Coulomb bound and Stribeck's term; a sphere contact at every
    link's tip above a floor."""
    model = urdf_from_string(chain_urdf(n), motors=[f"j{i}" for i in range(n)])
    frictional = [replace(j, dry=0.01, stribeck=(0.005, 0.1), coulomb=0.02) if i % 2 == 0
                  else replace(j, coulomb=0.05, stribeck=(0.01, 0.1)) for i, j in enumerate(model.joints)]
    tips = [Contact(f"tip{i}", f"l{i}", point=(0.0, 0.0, 0.15), origin=(0.0, 0.0, -1.0), mu=0.5, radius=0.02)
            for i in range(n)]
    return model._copy(joints=frictional, contacts=tips)


def _impulse_jacobian_equations(n: int) -> tuple[int, int]:
    model = _frictional_chain(n)
    x0 = model.initial_state({f"j{i}": 0.1 * (i + 1) for i in range(n)})
    x1 = model.initial_state({f"j{i}": 0.1 * (i + 1) + 1e-4 for i in range(n)}, {f"j{i}": 0.1 for i in range(n)})
    u = jnp.full(n, 0.2)

    def residual(a, b, p):
        return residuals.impulse(model, a, b, u, p, 1e-3)

    jacobian = jax.jacfwd(residual, argnums=(0, 1))
    return jaxpr_equation_count(jax.make_jaxpr(jacobian)(x0, x1, model.parameters.arrays()).jaxpr), model.layout.n_B


def test_impulse_jacobian_traced_size_with_dry_coulomb_and_contact_rows_does_not_grow_with_them() -> None:
    (one, rows_one), (six, rows_six) = _impulse_jacobian_equations(2), _impulse_jacobian_equations(6)
    print(f"impulse + jacfwd: {one} equations for 2 links ({rows_one} complementarity rows), "
          f"{six} for 6 ({rows_six} rows)")
    assert rows_six == 3 * rows_one  # the rows did triple: dry and Coulomb groups, contacts
    assert six <= 1.02 * one, (one, six)


def test_batches_place_every_row_of_b_in_exactly_one_group_in_the_layouts_order() -> None:
    """The batches' rows cover B once, grouped [normals, plus, minus, bound] as the layout's groups are."""
    model = _frictional_chain(3)
    C = model.arrays.complementarity
    assert sorted(b.kind for b in C.batches) == ["contact", "coulomb", "dry"]
    flat = np.concatenate([b.groups.rows.reshape(-1) for b in C.batches])
    np.testing.assert_array_equal(np.sort(flat), np.arange(model.layout.n_B))
    np.testing.assert_array_equal(flat[C.order], np.arange(model.layout.n_B))
    expected = {tuple(np.concatenate([g.normals, g.plus, g.minus, [g.bound]])) for g in model.layout.groups}
    assert {tuple(r) for b in C.batches for r in b.groups.rows} == expected
    assert all(isinstance(b.groups, complementarity.Batch) for b in C.batches)
