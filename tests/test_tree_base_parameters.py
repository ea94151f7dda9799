"""Base inertial parameters of URDF chains (mbfg.base_parameters): the planar two-link arm against its closed
form, the Panda-like 7-DOF arm against the count of Khalil and Dombre (2002) and against fresh regressors (the
base parameters reproduce every torque; the unidentifiable directions change none)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mbfg.base_parameters import BaseParameterOptions, inertial_base_parameters, random_states
from mbfg.errors import MbfgError
from mbfg.inverse_dynamics import regressor
from mbfg.kinematic_tree import load_tree, tree_from_string

PANDA = Path(__file__).resolve().parents[1] / "datasets" / "panda.urdf"
L1 = 0.3  # [m] the planar arm's first link: joint 2 sits at x = L1 of link 1's frame

#: A planar 2R arm: both axes along z, gravity in the plane (along -y); full inertia tensors (their
#: out-of-plane products never reach a torque).
PLANAR = f"""<robot name="arm2">
  <link name="base"/>
  <link name="link1"><inertial><origin xyz="0.2 0.01 0.02"/><mass value="1.5"/>
    <inertia ixx="0.01" ixy="0.001" ixz="0.002" iyy="0.02" iyz="0.003" izz="0.03"/></inertial></link>
  <link name="link2"><inertial><origin xyz="0.15 -0.02 0.01"/><mass value="0.8"/>
    <inertia ixx="0.004" ixy="0.0005" ixz="0.0003" iyy="0.006" iyz="0.0002" izz="0.007"/></inertial></link>
  <joint name="joint1" type="revolute"><parent link="base"/><child link="link1"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="10" velocity="3"/></joint>
  <joint name="joint2" type="revolute"><parent link="link1"/><child link="link2"/><origin xyz="{L1} 0 0"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="10" velocity="3"/></joint>
</robot>
"""
PLANAR_GRAVITY = (0.0, -9.81, 0.0)


def _vector(names: tuple[str, ...], terms: dict[str, float]) -> np.ndarray:
    v = np.zeros(len(names))
    for name, c in terms.items():
        v[names.index(name)] = c
    return v


@pytest.fixture(scope="module")
def planar():
    tree = tree_from_string(PLANAR)
    return tree, inertial_base_parameters(tree, gravity=PLANAR_GRAVITY)


def test_planar_two_link_base_parameters_are_the_classic_six(planar):
    """The closed form of a planar 2R arm under in-plane gravity (e.g. Khalil and Dombre 2002, ch. 12):
    ZZ1 + L1^2 m2, MX1 + L1 m2, MY1, ZZ2, MX2, MY2; every other parameter is unidentifiable."""
    tree, base = planar
    names = tree.parameter_names
    closed = np.array([
        _vector(names, {"Izz_link1": 1.0, "m_link2": L1**2}),
        _vector(names, {"mx_link1": 1.0, "m_link2": L1}),
        _vector(names, {"my_link1": 1.0}),
        _vector(names, {"Izz_link2": 1.0}),
        _vector(names, {"mx_link2": 1.0}),
        _vector(names, {"my_link2": 1.0}),
    ])
    assert base.rank == 6
    K = base.matrix
    # The same combinations: each closed-form row lies in the span of K's rows, and the dimensions agree.
    coefficients = np.linalg.lstsq(K.T, closed.T, rcond=None)[0]
    assert np.abs(K.T @ coefficients - closed.T).max() <= 1e-10
    assert set(base.expressions) == {"Izz_link1 + 0.09*m_link2", "mx_link1 + 0.3*m_link2", "my_link1", "Izz_link2",
                                     "mx_link2", "my_link2"}
    zero = {"m_link1", "mz_link1", "Ixx_link1", "Ixy_link1", "Iyy_link1", "Ixz_link1", "Iyz_link1",
            "mz_link2", "Ixx_link2", "Ixy_link2", "Iyy_link2", "Ixz_link2", "Iyz_link2"}
    assert {names[k] for k in base.zero} == zero
    assert len(base.unidentifiable) == 14 and zero < set(base.unidentifiable)


@pytest.fixture(scope="module")
def panda():
    tree = load_tree(PANDA)
    return tree, inertial_base_parameters(tree)


def test_panda_has_7n_minus_6_base_parameters(panda):
    """A serial revolute arm of n joints whose first axis is vertical and which has no parallel consecutive axes
    (the general case of Khalil and Dombre 2002, ch. 12): link 1 contributes only ZZ1R, every other link its 7
    regrouped parameters (XXR, XY, XZ, YZ, ZZR, MXR, MYR): 7 n - 6 = 43 for the 7-DOF arm."""
    tree, base = panda
    assert base.rank == 7 * tree.n - 6 == 43
    # Stable under another sampling: the rank is the structure's, not the samples'.
    other = inertial_base_parameters(tree, BaseParameterOptions(samples=50, seed=7))
    assert other.rank == base.rank


def test_base_parameters_reproduce_torques_and_null_directions_change_none_at_fresh_states(panda):
    """At states not used to find them: Y pi == Y[:, independent] (K pi), and Y d == 0 along each direction
    named unidentifiable."""
    tree, base = panda
    q, qd, qdd = random_states(tree, BaseParameterOptions(seed=11))
    Y = regressor(tree, q, qd, qdd).reshape(-1, 10 * tree.n)
    pi = tree.pi.ravel()
    tau = Y @ pi
    assert np.abs(Y[:, base.independent] @ base.values(pi) - tau).max() <= 1e-9 * np.abs(tau).max()
    K = base.matrix
    null = np.eye(10 * tree.n)[:, base.dependent]
    null[base.independent] = -base.beta
    assert np.abs(Y @ null).max() <= 1e-9 * np.abs(Y).max()
    assert np.abs(K @ null).max() <= 1e-12  # the base parameters do not see them either
    assert len(base.unidentifiable) == 10 * tree.n - base.rank


def test_base_parameter_options_are_checked_by_name():
    with pytest.raises(MbfgError, match="^tolerance: "):
        BaseParameterOptions(tolerance=0.0)
    with pytest.raises(MbfgError, match="^samples: "):
        BaseParameterOptions(samples=0)
