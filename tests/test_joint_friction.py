"""Joint friction and reflected rotor inertia columns (mbfg.joint_friction): the regressor times the parameters is
the friction law written out joint by joint, each joint's torque depends on its own parameters only, and the
smooth Coulomb term is the sign where the docstring says."""

from __future__ import annotations

import numpy as np
import pytest

from mbfg.errors import MbfgError
from mbfg.joint_friction import FrictionModel, friction_regressor, friction_torques, reflected_rotor_inertia


def _law(phi, qd, qdd, width, rotor):
    """tau_i = F_v qd_i + F_c s(qd_i) + F_o (+ I_a qdd_i), written per joint with a loop."""
    T, n = qd.shape
    out = np.zeros((T, n))
    for i in range(n):
        s = np.sign(qd[:, i]) if width == 0.0 else np.tanh(qd[:, i] / width)
        out[:, i] = phi[i, 0] * qd[:, i] + phi[i, 1] * s + phi[i, 2] + (phi[i, 3] * qdd[:, i] if rotor else 0.0)
    return out


@pytest.mark.parametrize(("width", "rotor"), [(0.0, True), (0.05, True), (0.02, False)])
def test_friction_regressor_times_parameters_is_the_friction_law(width, rotor):
    rng = np.random.default_rng(0)
    model = FrictionModel(coulomb_width=width, rotor=rotor)
    qd, qdd = rng.normal(0.0, 0.5, (40, 4)), rng.normal(0.0, 3.0, (40, 4))
    qd[0, 1] = 0.0  # sign(0) = 0
    phi = rng.uniform(0.05, 1.0, (4, model.size))
    Y = friction_regressor(qd, qdd, model)
    assert Y.shape == (40, 4, 4 * model.size)
    expected = _law(phi, qd, qdd, width, rotor)
    np.testing.assert_allclose(np.einsum("tij,j->ti", Y, phi.ravel()), expected, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(friction_torques(phi, qd, qdd, model), expected, rtol=1e-14, atol=1e-14)


def test_each_joint_torque_depends_on_its_own_friction_parameters_only():
    rng = np.random.default_rng(1)
    model = FrictionModel(coulomb_width=0.01)
    Y = friction_regressor(rng.normal(size=(10, 3)), rng.normal(size=(10, 3)), model).reshape(10, 3, 3, model.size)
    for i in range(3):
        for j in range(3):
            if i != j:
                assert np.all(Y[:, i, j] == 0.0)
    assert np.all(Y[:, np.arange(3), np.arange(3), 2] == 1.0)  # the offset column


def test_smooth_coulomb_is_within_one_percent_of_the_sign_beyond_2_65_widths():
    width = 0.02
    qd = np.linspace(2.65 * width, 10.0, 200)[:, None]
    s = friction_regressor(qd, np.zeros_like(qd), FrictionModel(coulomb_width=width))[:, 0, 1]
    assert np.all(np.abs(s - 1.0) < 0.01)
    inside = friction_regressor(np.array([[2.5 * width]]), np.zeros((1, 1)), FrictionModel(coulomb_width=width))
    assert abs(inside[0, 0, 1] - 1.0) > 0.01


def test_reflected_rotor_inertia_is_gear_ratio_squared_times_rotor_inertia():
    np.testing.assert_allclose(reflected_rotor_inertia([2e-5, 1e-5], [100.0, -50.0]), [0.2, 0.025], rtol=1e-14)
    with pytest.raises(MbfgError, match="gear_ratio"):
        reflected_rotor_inertia([1e-5], [0.0])
    with pytest.raises(MbfgError, match="rotor_inertia"):
        reflected_rotor_inertia([-1e-5], [10.0])
    with pytest.raises(MbfgError, match="coulomb_width"):
        FrictionModel(coulomb_width=-1.0)
