"""``mbfg identify`` end to end on a three-link chain: a log simulated with known inertial parameters and friction
(the truth, a URDF of its own), identified from the nominal URDF; the base parameters it reports against the
truth's, the calibrated URDF read back, and its user errors (exit 2, naming the culprit) and unconverged solves
(exit 1)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

from mbfg.arm_identification import extended_base_parameters
from mbfg.cli import main
from mbfg.excitation import ExcitationOptions, random_trajectory
from mbfg.inverse_dynamics import inverse_dynamics
from mbfg.joint_friction import FrictionModel, friction_torques
from mbfg.kinematic_tree import load_tree, tree_from_string
from mbfg.testing import chain_urdf
from mbfg.urdf_writer import calibrated_urdf

H = 0.002  # [s]
ANGLE_NOISE, TORQUE_NOISE = 1e-5, 0.01  # [rad], [N m]
#: Per joint F_v [N m s/rad], F_c [N m], F_o [N m] of the simulated arm.
FRICTION = np.array([[0.10, 0.20, 0.05], [0.08, 0.15, -0.03], [0.05, 0.10, 0.02]])


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    """The nominal URDF, the truth's standard parameters (3, 10), and a 4 s log at 500 Hz of a random Fourier
    trajectory: angles and torques (inverse dynamics of the truth plus its friction, sign(qd) Coulomb) with noise,
    the torques in u_<joint> columns; also the noiseless angles, rates, accelerations and torques."""
    folder = tmp_path_factory.mktemp("identify")
    text = chain_urdf(3)
    nominal = tree_from_string(text)
    pi = nominal.pi.copy()
    pi[:, 0] *= [1.2, 0.9, 1.1]   # masses
    pi[:, 3] *= [1.1, 1.05, 0.8]  # first moments along the links
    pi[:, 4:] *= 1.1              # inertia about the joints
    truth = tree_from_string(calibrated_urdf(text, nominal, pi))
    traj = random_trajectory(truth, ExcitationOptions(duration=4.0, harmonics=3, fill=0.8, seed=2))
    t = np.arange(2001) * H
    q, qd, qdd = traj.evaluate(t)
    tau = inverse_dynamics(truth, q, qd, qdd) + friction_torques(FRICTION, qd, qdd, FrictionModel(rotor=False))
    rng = np.random.default_rng(0)
    q_meas = q + rng.normal(0.0, ANGLE_NOISE, q.shape)
    tau_meas = tau + rng.normal(0.0, TORQUE_NOISE, q.shape)
    (folder / "robot.urdf").write_text(text)
    log = folder / "log.csv"
    pd.DataFrame({"t": t, **{j: q_meas[:, k] for k, j in enumerate(nominal.joints)},
                  **{f"u_{j}": tau_meas[:, k] for k, j in enumerate(nominal.joints)}}).to_csv(log, index=False)
    return {"folder": folder, "urdf": folder / "robot.urdf", "log": log, "tree": nominal, "pi": truth.pi,
            "t": t, "q": q_meas, "tau": tau_meas, "qd": qd}


def _identify(capsys, *argv) -> tuple[int, str, str]:
    code = main(["identify", *(str(a) for a in argv)])
    out, err = capsys.readouterr()
    return code, out, err


def _truth_base(rig, model: FrictionModel, friction: np.ndarray):
    base = extended_base_parameters(rig["tree"], model)
    return base, base.values(np.concatenate([rig["pi"].ravel(), friction.ravel()]))


def test_identified_base_parameters_are_the_simulated_arms_within_3_std_and_its_urdf_reads_them_back(rig, capsys):
    out_urdf, out_json = rig["folder"] / "calibrated.urdf", rig["folder"] / "result.json"
    code, out, err = _identify(capsys, rig["urdf"], rig["log"], "--out", out_urdf, "--json", out_json)
    assert code == 0, out + err
    doc = json.loads(out_json.read_text())
    base, truth = _truth_base(rig, FrictionModel(rotor=False), FRICTION)
    assert [p["expression"] for p in doc["base_parameters"]] == list(base.expressions)
    values = np.array([p["value"] for p in doc["base_parameters"]])
    std = np.array([p["std"] for p in doc["base_parameters"]])
    assert np.all(np.abs(values - truth) <= 3.0 * std), np.abs(values - truth) / std
    assert np.all(np.abs(values - truth) <= 0.01 * np.abs(truth) + 1e-3), (values, truth)  # mx_l*: truth 0
    assert doc["status"] == "converged" and "solver: converged" in out
    assert doc["unidentifiable"] == list(base.unidentifiable) and "Izz_l2" in out  # no torque sees Izz of a y-axis
    # Torque RMS of the fit: the torque noise, plus what the angle noise does to the accelerations.
    rms = np.array(list(doc["torque_rms"].values()))
    assert np.all((rms > 0.9 * TORQUE_NOISE) & (rms < 1.5 * TORQUE_NOISE)), rms

    # The URDF read back: its inertial parameters and the JSON's friction give the reported base parameters, and
    # its <dynamics> holds the identified F_v and F_c.
    written = load_tree(out_urdf)
    phi = np.array([[doc["parameters"][f"{p}_{j}"] for p in ("Fv", "Fc", "Fo")] for j in written.joints])
    np.testing.assert_allclose(base.values(np.concatenate([written.pi.ravel(), phi.ravel()])), values,
                               rtol=1e-9, atol=1e-12)
    dynamics = {j.get("name"): j.find("dynamics") for j in ET.parse(out_urdf).getroot().findall("joint")}
    for k, joint in enumerate(written.joints):
        assert float(dynamics[joint].get("damping")) == pytest.approx(phi[k, 0], rel=1e-12)
        assert float(dynamics[joint].get("friction")) == pytest.approx(phi[k, 1], rel=1e-12)


def test_least_squares_from_a_torque_file_without_offsets_recovers_the_base_parameters(rig, capsys):
    """--method ls on low-passed angles (--cutoff), the torques in tau_<joint> columns of their own file, and a
    friction model without the offset (the simulated offsets taken out of the torques). The least change of the
    URDF's parameters that gives the estimate moves link l0's first moment mz_l0 (identifiable) but not its I_xx
    (no torque sees it): that is no mass distribution, so no URDF is written and the exit status is 1."""
    folder, tree = rig["folder"], rig["tree"]
    angles = folder / "angles.csv"
    pd.read_csv(rig["log"])[["t", *tree.joints]].to_csv(angles, index=False)
    torques = folder / "tau.csv"
    tau = rig["tau"] - FRICTION[:, 2]
    pd.DataFrame({"t": rig["t"], **{f"tau_{j}": tau[:, k] for k, j in enumerate(tree.joints)}}).to_csv(torques,
                                                                                                      index=False)
    out_json, out_urdf = folder / "ls.json", folder / "ls.urdf"
    code, out, err = _identify(capsys, rig["urdf"], angles, "--torques", torques, "--method", "ls", "--cutoff", "5",
                               "--friction", "viscous,coulomb", "--out", out_urdf, "--json", out_json)
    doc = json.loads(out_json.read_text())
    base, truth = _truth_base(rig, FrictionModel(rotor=False, terms=("viscous", "coulomb")), FRICTION[:, :2])
    assert [p["expression"] for p in doc["base_parameters"]] == list(base.expressions)
    values = np.array([p["value"] for p in doc["base_parameters"]])
    std = np.array([p["std"] for p in doc["base_parameters"]])
    assert np.all(np.abs(values - truth) <= 3.0 * std), np.abs(values - truth) / std
    assert doc["trim_s"] == 1.0 and doc["samples"] == 1001  # 5 / cutoff at each end of 4 s at 500 Hz
    assert code == 1 and doc["status"] == "converged" and not doc["urdf_written"], out + err
    assert "no URDF written: the least-squares estimate is no mass distribution (link l0" in out
    assert not out_urdf.exists()


def test_an_iteration_limit_is_reported_not_converged_with_exit_status_1(rig, capsys):
    code, out, err = _identify(capsys, rig["urdf"], rig["log"], "--max-iterations", "1",
                               "--out", rig["folder"] / "one.urdf")
    assert code == 1, out + err
    assert "solver: NOT converged" in out


def _user_error(capsys, *argv) -> str:
    code, _, err = _identify(capsys, *argv)
    assert code == 2 and err.startswith("mbfg: error: ") and "Traceback" not in err, err
    return err


def _rewritten(rig, name, change) -> str:
    frame = change(pd.read_csv(rig["log"]))
    path = rig["folder"] / name
    frame.to_csv(path, index=False)
    return str(path)


def test_a_missing_joint_a_column_naming_no_joint_and_uneven_times_are_refused_by_name(rig, capsys):
    out = rig["folder"] / "never.urdf"
    no_joint = _rewritten(rig, "no_j1.csv", lambda f: f.drop(columns=["j1"]))
    assert "no column 'j1'" in _user_error(capsys, rig["urdf"], no_joint, "--out", out)
    no_torque = _rewritten(rig, "no_u_j2.csv", lambda f: f.drop(columns=["u_j2"]))
    assert "no torque column for joint j2" in _user_error(capsys, rig["urdf"], no_torque, "--out", out)
    stranger = _rewritten(rig, "stranger.csv", lambda f: f.assign(tau_j7=0.0))
    assert "column 'tau_j7' names no joint of chain3" in _user_error(capsys, rig["urdf"], stranger, "--out", out)
    twice = _rewritten(rig, "twice.csv", lambda f: f.assign(tau_j0=f["u_j0"]))
    assert "joint j0's torque is in two columns (u_j0, tau_j0)" in _user_error(capsys, rig["urdf"], twice, "--out",
                                                                                out)
    uneven = _rewritten(rig, "uneven.csv", lambda f: f.drop(index=500))
    assert "times are not uniform: t[500] - t[499]" in _user_error(capsys, rig["urdf"], uneven, "--out", out)
    both = rig["folder"] / "tau_both.csv"
    pd.read_csv(rig["log"])[["t", "u_j0", "u_j1", "u_j2"]].to_csv(both, index=False)
    assert "gives them too" in _user_error(capsys, rig["urdf"], rig["log"], "--torques", both, "--out", out)
    angles = _rewritten(rig, "angles_only.csv", lambda f: f[["t", "j0", "j1", "j2"]])
    shifted = rig["folder"] / "tau_shifted.csv"
    pd.read_csv(both).assign(t=lambda f: f["t"] + H).to_csv(shifted, index=False)
    assert "expected the times of LOG.csv" in _user_error(capsys, rig["urdf"], angles, "--torques", shifted,
                                                          "--out", out)
    assert not out.exists()
