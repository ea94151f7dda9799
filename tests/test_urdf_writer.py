"""A calibrated arm written back as URDF (mbfg.urdf_writer): read again by mbfg's own URDF readers, it gives back the
standard parameters written (the Panda with new, non-diagonal inertials; a link with a fixed child), and the
centre-of-mass form is Steiner's theorem checked on a known body."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mbfg.errors import MbfgError
from mbfg.kinematic_tree import load_tree, standard_parameters, tree_from_string
from mbfg.pseudo_inertia import log_cholesky_from_standard, standard_from_log_cholesky
from mbfg.urdf_writer import calibrated_urdf

PANDA = Path(__file__).resolve().parents[1] / "datasets" / "panda.urdf"

FIXED_CHILD = """<robot name="arm">
  <link name="base"/>
  <link name="upper"><inertial><origin xyz="0.1 0 0"/><mass value="1.0"/>
    <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.004" iyz="0" izz="0.004"/></inertial></link>
  <link name="tool"><inertial><origin xyz="0 0.02 0.01" rpy="0.1 0.2 0.3"/><mass value="0.3"/>
    <inertia ixx="0.0002" ixy="0.00001" ixz="0" iyy="0.0003" iyz="0" izz="0.0001"/></inertial></link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" effort="10" velocity="2"/></joint>
  <joint name="flange" type="fixed"><parent link="upper"/><child link="tool"/><origin xyz="0.25 0 0"/></joint>
</robot>
"""


def test_written_panda_reads_back_the_identified_parameters_and_keeps_the_kinematics():
    tree = load_tree(PANDA)
    rng = np.random.default_rng(0)
    theta = log_cholesky_from_standard(tree.pi) + rng.normal(0.0, 0.1, (tree.n, 10))
    pi = np.asarray(standard_from_log_cholesky(theta))
    friction = rng.uniform(0.1, 1.0, (tree.n, 2))
    text = calibrated_urdf(PANDA.read_text(encoding="utf-8"), tree, pi, friction)
    again = tree_from_string(text)
    np.testing.assert_allclose(again.pi, pi, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(again.origin, tree.origin)
    np.testing.assert_array_equal(again.axis, tree.axis)
    assert again.limits == tree.limits
    from mbfg.urdf import urdf_from_string  # the rigid-body reader takes it too: damping and friction as written

    model = urdf_from_string(text)
    assert model.parameters["b_panda_joint3"].default == pytest.approx(friction[2, 0], rel=1e-15)
    assert model.parameters["fc_panda_joint7"].default == pytest.approx(friction[6, 1], rel=1e-15)


def test_a_fixed_child_is_folded_into_its_moving_link_and_reads_back_the_same():
    tree = tree_from_string(FIXED_CHILD)
    theta = log_cholesky_from_standard(tree.pi) + np.array([0.1, 0.05, -0.1, 0.2, 0.01, 0.02, -0.01, 0.02, 0.0, 0.01])
    pi = np.asarray(standard_from_log_cholesky(theta))
    text = calibrated_urdf(FIXED_CHILD, tree, pi)
    np.testing.assert_allclose(tree_from_string(text).pi, pi, rtol=1e-12, atol=1e-15)
    assert text.count("<inertial>") == 1


def test_centre_of_mass_form_is_steiners_theorem_on_a_known_body():
    """A 2 kg body with its centre of mass at (0.1, -0.05, 0.2) m and a full tensor about it: the written
    <origin xyz> and <inertia> are those numbers."""
    Ic = np.array([[0.03, 0.002, -0.001], [0.002, 0.04, 0.003], [-0.001, 0.003, 0.02]])
    c = np.array([0.1, -0.05, 0.2])
    tree = tree_from_string(FIXED_CHILD.replace('<inertial><origin xyz="0 0.02 0.01" rpy="0.1 0.2 0.3"/><mass '
                                                'value="0.3"/>\n    <inertia ixx="0.0002" ixy="0.00001" ixz="0" '
                                                'iyy="0.0003" iyz="0" izz="0.0001"/></inertial>', ""))
    text = calibrated_urdf(FIXED_CHILD, tree, standard_parameters(2.0, c, Ic))
    import xml.etree.ElementTree as ET

    inertial = ET.fromstring(text.split("\n", 1)[1]).find("link[@name='upper']/inertial")
    np.testing.assert_allclose([float(x) for x in inertial.find("origin").get("xyz").split()], c, rtol=1e-14)
    got = inertial.find("inertia").attrib
    np.testing.assert_allclose([float(got[k]) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")],
                               [0.03, 0.002, -0.001, 0.04, 0.003, 0.02], rtol=1e-12, atol=1e-16)


def test_an_inconsistent_link_is_refused_by_name():
    tree = tree_from_string(FIXED_CHILD)
    bad = standard_parameters(1.0, np.zeros(3), np.diag([1.0, 1.0, 3.0]))
    with pytest.raises(MbfgError, match="link upper: not physically consistent"):
        calibrated_urdf(FIXED_CHILD, tree, bad)
