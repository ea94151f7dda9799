"""A fixed-lag smoother of our own for a chain of states: square-root information elimination, oldest first.

The stream's graph is a chain: every factor touches one state or two consecutive
ones (impulse factors x_k -> x_{k+1}; observation, initial-state and prior factors
on one state). Eliminated oldest first, by QR of each state's rows, the chain
leaves a *conditional* per state, ``R_j delta_j + S_j delta_{j+1} = d_j``, and a
square-root information ``[R_f | d_f]`` on the newest state, the *frontier*
(the filter). An update adds new states after the frontier: their factors are
linearized in one vectorized call per factor group (no GTSAM callbacks), the old
frontier and the new states are eliminated in turn, and one back-substitution,
newest to oldest, gives every window state (one banded triangular solve over the
window's conditionals, :mod:`mbfg.graphs.stream.band`). Marginalizing the states a lag back
is dropping their conditionals: what they knew already sits in the later ones.
The stream's regular updates (a sample for each of N new states, no gap) take
:meth:`ChainWindow.update_regular` instead: the prediction of the new states,
their linearization and the elimination in one compiled program
(:mod:`mbfg.graphs.stream.fused`).

Linearization points (``theta``) are those of GTSAM's fixed-lag smoothers: each
state's factors are linearized where the state entered (its prediction), the new
states are relinearized at their solution while their update exceeds the
threshold (``relinearize_threshold``, at most ``max_passes`` times) together with
the frontier they extend (its square-root information and the conditional before it
moved with its point, :meth:`ChainWindow._move_frontier`), and an older state is not
relinearized again (first-estimate linearization: between updates a state moves by the
smoothing correction, orders below the threshold). The frontier must move: the impulse
factor between it and the first new state holds the joints' rows, 1/eps heavy, whose
linearization over a state's correction is wrong by far more than the noise at stiff joints. QR rather
than normal equations, as the iSAM2 window: the impulse rows carry weights ~1e3
times the observations' and would square into the conditioning.

The interface is that of :class:`~mbfg.graphs.stream.window.ISAM2Window` used by
the estimator (``update``, ``calculateEstimatePose3``, ``calculateEstimateVector``, and
``estimates`` for whole states at once);
it takes the new factors as a list of :class:`~mbfg.adapter.FactorGroup` (evaluated
vectorized) and GTSAM nonlinear factors (linearized by GTSAM).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gtsam
import numpy as np

from mbfg._jax import jnp
from mbfg.adapter import FactorGroup
from mbfg.graphs.stream.band import ConditionalBand
from mbfg.graphs.stream.scan import DETERMINED, Block, eliminate_regular, regular_rows
from mbfg.lie import pose3_retract_np


class ChainError(RuntimeError):
    """A factor the chain cannot hold (it skips a state or touches an eliminated one), or a state the
    factors leave undetermined."""


@dataclass
class _State:
    """One state of the window: its stamp, keys and their tangent column slices; once eliminated, the
    square-root information R of its conditional ``R delta + R G delta_next = R a``, for the covariances (G and
    a are in the band of the back-substitution, :class:`~mbfg.graphs.stream.band.ConditionalBand`)."""

    stamp: float
    keys: list[int]
    columns: dict[int, slice]
    dim: int
    thresholds: np.ndarray  # (dim,) the relinearization threshold of each tangent component
    R: np.ndarray | None = None  # (n, n) upper-triangular: the conditional's square-root information


class ChainWindow:
    """Fixed-lag smoother over a chain of states (module docstring).

    Args:
        lag: states stamped more than this before the newest are marginalized [s].
        pose_threshold, velocity_threshold: a new state is relinearized while the update of a Pose3
            variable (tangent [rad, m]) or of a Vector variable exceeds these (largest component).
        max_passes: linearizations of an update's new factors at most.
    """

    def __init__(self, lag: float, pose_threshold: float = 0.05, velocity_threshold: float = 10.0,
                 max_passes: int = 4) -> None:
        self.lag = lag
        self.pose_threshold, self.velocity_threshold, self.max_passes = pose_threshold, velocity_threshold, max_passes
        # The linearization points of the window's variables: a Pose3 as its 4x4 matrix, a Vector as is.
        # Arrays, not gtsam.Values: a regular update inserts them and reads states out without a GTSAM call.
        self.theta: dict[int, np.ndarray] = {}
        self._states: list[_State] = []  # oldest first; all but the newest are eliminated
        self._offset = 0  # states marginalized so far: self._states[0] is state number _offset of the stream
        self._vars: dict[int, tuple[int, bool]] = {}  # key -> (state number, is a Pose3); columns: its _State
        self._frontier: np.ndarray | None = None  # [R_f | d_f] on the newest state
        self._band: ConditionalBand | None = None  # the conditionals for the back-substitution, once n is known
        # A state's layout ((dim, is a Pose3) per key, in key order) -> its column slices, dimension, thresholds.
        self._layouts: dict[tuple[tuple[int, bool], ...], tuple[list[slice], int, np.ndarray]] = {}
        self._deltas = np.zeros((0, 0))  # (window states, n): each state's update from theta
        self._covariances: list[np.ndarray] | None = None  # per window state, on request (joint_covariance)
        #: How the last update was eliminated: "fused" (:meth:`update_regular`), "scan" (the factor groups'
        #: rows in :func:`eliminate_regular`), "loop" (NumPy, state by state).
        self.last_path = ""

    # ------------------------------------------------------------------ update
    def update(self, factors: Sequence[FactorGroup | gtsam.NonlinearFactor], values: gtsam.Values,
               stamps: Mapping[int, float]) -> None:
        """Add the new variables ``values`` (stamped by ``stamps``: key -> time [s]) and the new ``factors``,
        solve, and marginalize the states stamped more than ``lag`` before the newest."""
        n_old = len(self._states)
        by_time: dict[float, list[int]] = {}
        for key in values.keys():
            if key not in stamps:
                raise ChainError(f"variable {gtsam.DefaultKeyFormatter(key)} has no stamp")
            by_time.setdefault(stamps[key], []).append(key)
        for stamp in sorted(by_time):
            if self._states and stamp <= self._states[-1].stamp:
                raise ChainError(f"a new state at {stamp} s is not after the newest one ({self._states[-1].stamp} s)")
            self._states.append(self._new_state(stamp, by_time[stamp], values))
        self._remember(values)
        first = max(n_old - 1, 0)  # the old frontier is eliminated again with the new states
        frontier = self._frontier
        if n_old and frontier is not None:
            frontier = self._move_frontier(first, frontier)
        for passes in range(1, self.max_passes + 1):
            self._eliminate(first, frontier, self._linearize(factors, first))
            self._back_substitute()
            # The last pass keeps its linearization points: the conditionals are linear about them.
            if passes == self.max_passes:
                break
            moved = self._relinearize(n_old)
            if frontier is not None and n_old and np.any(np.abs(self._deltas[first]) > self._states[first].thresholds):
                frontier, moved = self._move_frontier(first, frontier), True
            if not moved:
                break
        self._marginalize()

    def update_regular(self, front_keys: Sequence[int], new_keys: Sequence[Sequence[int]], stamps: Sequence[float],
                       binary_keys: Sequence[int], unary_keys: Sequence[int], solve: Callable[..., Any],
                       user_rows: Sequence[tuple[Sequence[int], int]] = ()) -> None:
        """A regular update (:mod:`mbfg.graphs.stream.fused`) in one compiled call per linearization pass.

        Args:
            front_keys: the frontier's keys, its poses then its velocity.
            new_keys, stamps: the keys of each new state (in the order of ``front_keys``) and its time [s].
            binary_keys: the keys of the factor between the frontier and the first new state, and
                unary_keys: those of the factor on the first new state (the others lie alike).
            solve: ``solve(T_front, v_front, T_est, v_est, T_given, v_given, use_given, carried,
                binary_order, unary_order, user_targets)``: the program of
                :func:`~mbfg.graphs.stream.fused.regular_update_program` with the update's data bound.
            user_rows: per user factor kind, (its keys at the first new state, span: 1 on that state, 2 between
                the frontier and it); ``user_targets`` are their chain columns on [frontier | first new] (span
                2) or on the first new state (span 1).
        """
        if self._frontier is None:
            raise ChainError("a regular update needs a window with a frontier")
        n_old = len(self._states)
        first = n_old - 1
        front = self._states[first]
        dims = {role: front.columns[key].stop - front.columns[key].start for role, key in enumerate(front_keys)}
        poses = [self._vars[key][1] for key in front_keys]
        for stamp, state_keys in zip(stamps, new_keys):
            if stamp <= self._states[-1].stamp:
                raise ChainError(f"a new state at {stamp} s is not after the newest one ({self._states[-1].stamp} s)")
            self._states.append(self._add_state(stamp, {key: (dims[role], poses[role])
                                                        for role, key in enumerate(state_keys)}))
        n = front.dim
        carried = np.zeros((n, n + 1))
        carried[: len(self._frontier)] = self._frontier
        carried = self._move_frontier(first, carried)
        T_front = np.array([self.theta[key] for key in front_keys[:-1]])
        v_front = self.theta[front_keys[-1]]
        T_est = np.array([self.calculateEstimatePose3(key).matrix() for key in front_keys[:-1]])
        v_est = self.calculateEstimateVector(front_keys[-1])
        # The factors' tangent components in the chain's column order (each factor covers its states).
        binary_cols, unary_cols = self._targets(binary_keys, first), self._targets(unary_keys, first + 1)
        if sorted(binary_cols) != list(range(2 * n)) or sorted(unary_cols) != list(range(n)):
            raise ChainError("a regular update's factors must cover their states' variables")
        binary_order, unary_order = np.argsort(binary_cols), np.argsort(unary_cols)
        user_targets = []
        for row, span in user_rows:
            target = self._targets(row, first + 2 - span)
            if len(np.unique(target)) != len(target) or np.any(target >= span * n):
                raise ChainError("a user factor of a regular update must lie on the new state (and the one before)"
                                 ", each variable once")
            user_targets.append(target)
        T_given, v_given = np.zeros((len(new_keys), *T_front.shape)), np.zeros((len(new_keys), *v_front.shape))
        use_given = False
        for passes in range(1, self.max_passes + 1):
            T_new, v_new, *eliminated = solve(T_front, v_front, T_est, v_est, T_given, v_given, use_given, carried,
                                              binary_order, unary_order, user_targets)
            self._accept(first, *eliminated)
            T_new, v_new = np.asarray(T_new), np.asarray(v_new)
            if not use_given:  # the prediction: the new states' linearization points
                for state_keys, T, v in zip(new_keys, T_new, v_new):
                    self.theta.update(zip(state_keys, T))
                    self.theta[state_keys[-1]] = v
            self._back_substitute()
            if passes == self.max_passes:
                break
            moved = self._relinearize(n_old)
            if np.any(np.abs(self._deltas[first]) > front.thresholds):
                carried, moved = self._move_frontier(first, carried), True
                T_front = np.array([self.theta[key] for key in front_keys[:-1]])
                v_front = self.theta[front_keys[-1]]
            if not moved:
                break
            T_given = np.array([[self.theta[key] for key in state_keys[:-1]] for state_keys in new_keys])
            v_given = np.array([self.theta[state_keys[-1]] for state_keys in new_keys])
            use_given = True
        self.last_path = "fused"
        self._marginalize()

    def _remember(self, values: gtsam.Values) -> None:
        """The window variables' linearization points ``values`` into :attr:`theta`."""
        for key in values.keys():
            self.theta[key] = values.atPose3(key).matrix() if self._vars[key][1] else np.asarray(values.atVector(key))

    def _values(self, key_list: Sequence[int]) -> gtsam.Values:
        """The linearization points of ``key_list`` as GTSAM values (for the factors GTSAM linearizes)."""
        values = gtsam.Values()
        for key in key_list:
            if self._vars[key][1]:
                values.insert(key, gtsam.Pose3(self.theta[key]))
            else:
                values.insert(key, self.theta[key])
        return values

    def _new_state(self, stamp: float, key_list: list[int], values: gtsam.Values) -> _State:
        dims = {}
        for key in key_list:
            try:
                values.atPose3(key)
                dims[key] = (6, True)
            except RuntimeError:
                dims[key] = (len(values.atVector(key)), False)
        return self._add_state(stamp, dims)

    def _add_state(self, stamp: float, dims: Mapping[int, tuple[int, bool]]) -> _State:
        """A new newest state of the variables ``dims`` (key -> (tangent dimension, is a Pose3)); its
        columns in key order."""
        number = self._offset + len(self._states)
        order = sorted(dims)
        shape = tuple(dims[key] for key in order)
        if shape not in self._layouts:  # every state of a stream has the same layout: its slices once
            slices, col, per_key = [], 0, []
            for dim, pose in shape:
                slices.append(slice(col, col + dim))
                per_key.append(np.full(dim, self.pose_threshold if pose else self.velocity_threshold))
                col += dim
            self._layouts[shape] = (slices, col, np.concatenate(per_key))
        slices, col, thresholds = self._layouts[shape]
        for key, (_, pose) in zip(order, shape):
            self._vars[key] = (number, pose)
        return _State(stamp, order, dict(zip(order, slices)), col, thresholds)

    def _linearize(self, factors: Sequence[FactorGroup | gtsam.NonlinearFactor], first: int) -> list[Block]:
        """Each factor's whitened rows, by the window states they touch (only states from ``first`` on)."""
        where = {key: j for j in range(first, len(self._states)) for key in self._states[j].keys}
        values = self._values(list(where))
        blocks: list[Block] = []
        cache: dict[int, np.ndarray] = {}
        for factor in factors:
            key_rows = factor.keys if isinstance(factor, FactorGroup) else [list(factor.keys())]
            for key in {key for row in key_rows for key in row} - where.keys():
                raise ChainError(f"a factor on {gtsam.DefaultKeyFormatter(key)}, a state already eliminated "
                                 "or not in the window")
            if isinstance(factor, FactorGroup):
                if not isinstance(factor.noise, gtsam.noiseModel.Diagonal):  # whitening = dividing by sigmas
                    raise ChainError(f"{factor.ft.name}: the chain takes diagonal noise models, got "
                                     f"{type(factor.noise).__name__}")
                out = factor.evaluate(factor.read(values, cache), linearize=True)  # (N, m, 1 + dims)
                out = out / np.asarray(factor.noise.sigmas())[None, :, None]
            else:
                linear = factor.linearize(values)
                A, b = linear.jacobian()
                out = np.hstack([-b[:, None], A])[None]
                key_rows = [list(linear.keys())]
            blocks.append(self._block(key_rows, out, where, isinstance(factor, FactorGroup)))
        return blocks

    def _columns(self, key: int) -> slice:
        """The columns of variable ``key`` in its state's tangent vector."""
        if key not in self._vars:
            raise ChainError(f"a factor on {gtsam.DefaultKeyFormatter(key)}, a variable not in the window")
        return self._states[self._vars[key][0] - self._offset].columns[key]

    def _block(self, key_rows: Sequence[Sequence[int]], out: np.ndarray, where: Mapping[int, int],
               grouped: bool = True) -> Block:
        """The rows ``out`` (N, m, 1 + tangent dims) = [-b | A] of N factors of one kind on ``key_rows``
        as a :class:`Block`: A's columns moved into the layout of the states they touch."""
        states = [where[key] for key in key_rows[0]]  # every key is in the window (checked by _linearize)
        first, span = min(states), max(states) - min(states) + 1
        if span > 2:
            raise ChainError(f"a factor on states {sorted(set(states))} of the window: the chain takes one state "
                             "or two consecutive ones")
        n = self._states[first].dim
        if any(self._states[j].dim != n for j in states):
            raise ChainError("a factor between states of different sizes")
        target = self._targets(key_rows[0], first)  # the same for every row of a group
        A = np.zeros((out.shape[0], out.shape[1], span * n))
        A[:, :, target] = out[:, :, 1 : 1 + len(target)]
        firsts = np.array([where[row[0]] - states[0] + first for row in key_rows])
        for row, j0 in zip(key_rows, firsts):  # every row must lie on its states as the first one does
            if any(where[key] - j0 != j - first for key, j in zip(row, states)):
                raise ChainError("the factors of one group lie differently on their states")
        return Block(firsts, span, A, -out[:, :, 0], grouped)

    def _targets(self, key_row: Sequence[int], first: int) -> np.ndarray:
        """The column of each tangent component of the variables ``key_row`` in [x_first | x_first+1 ...]."""
        target = []
        for key in key_row:
            j = self._vars[key][0] - self._offset
            cols = self._states[j].columns[key]
            target.append(np.arange(cols.start, cols.stop) + (j - first) * self._states[first].dim)
        return np.concatenate(target)

    def _eliminate(self, first: int, frontier: np.ndarray | None, blocks: list[Block]) -> None:
        """QR elimination of the states ``first`` .. newest-1 into conditionals; the newest's rows become
        the frontier. ``frontier``: the square-root information on state ``first`` before this update."""
        n = self._states[first].dim
        last = len(self._states) - 1
        if any(s.dim != n for s in self._states[first:]):
            raise ChainError("the window's states differ in size")
        regular = regular_rows(blocks, first, last, frontier)
        if regular is not None:
            self._accept(first, *eliminate_regular(*regular))
            self.last_path = "scan"
            return
        self.last_path = "loop"
        rows: dict[int, list[np.ndarray]] = {}  # state j -> rows [A_j | A_j+1 | b], zero-padded
        for block in blocks:
            for j, A, b in zip(block.first, block.A, block.b):
                padded = np.zeros((len(b), 2 * n + 1))
                padded[:, : A.shape[1]] = A
                padded[:, -1] = b
                rows.setdefault(int(j), []).append(padded)
        carried = frontier  # [R | d] on state j, from the states before it
        for j in range(first, last + 1):
            stack = rows.get(j, [])
            if carried is not None:
                padded = np.zeros((len(carried), 2 * n + 1))
                padded[:, :n], padded[:, -1] = carried[:, :n], carried[:, n]
                stack = [padded, *stack]
            if not stack:
                raise ChainError(f"no factor determines state {j} of the window (at {self._states[j].stamp} s): "
                                 "it is undetermined")
            M = np.vstack(stack)
            R: np.ndarray = np.linalg.qr(M, mode="r")  # type: ignore[assignment]  # mode "r": R only
            if R.shape[0] < n or np.any(np.abs(np.diag(R[:n, :n])) <= DETERMINED * np.linalg.norm(M[:, :n], axis=0)):
                raise ChainError(f"the factors leave state {j} of the window (at {self._states[j].stamp} s) "
                                 "undetermined")
            if j == last:
                self._frontier = np.hstack([R[:n, :n], R[:n, -1:]])
            else:
                sol = np.linalg.solve(R[:n, :n], R[:n, n:])  # [G | a]
                self._states[j].R = R[:n, :n]
                self._conditionals(n).set(j, sol[None, :, :n], sol[None, :, n])
                carried = R[n : 2 * n, n:] if R.shape[0] > n else None

    def _accept(self, first: int, G: jnp.ndarray, a: jnp.ndarray, R: jnp.ndarray, R_f: jnp.ndarray,
                ok: jnp.ndarray) -> None:
        """The conditionals of the states ``first`` .. newest-1 and the frontier, from
        :func:`eliminate_regular` (its G, a, R, R_f, ok); a state left undetermined is refused by name."""
        bad = np.flatnonzero(~np.asarray(ok))
        if bad.size:
            j = first + int(bad[0])
            raise ChainError(f"the factors leave state {j} of the window (at {self._states[j].stamp} s) undetermined")
        G_np = np.asarray(G)
        for s, R_j in zip(self._states[first:], np.asarray(R)):
            s.R = R_j
        self._conditionals(G_np.shape[1]).set(first, G_np, np.asarray(a))
        self._frontier = np.asarray(R_f)

    def _conditionals(self, n: int) -> ConditionalBand:
        """The band of the window's conditionals (states of tangent dimension ``n``)."""
        if self._band is None:
            self._band = ConditionalBand(n)
        return self._band

    def _back_substitute(self) -> None:
        """Every window state's update, newest to oldest through the conditionals (one row per state)."""
        assert self._frontier is not None
        n = self._states[-1].dim
        delta = np.linalg.solve(self._frontier[:, :n], self._frontier[:, n])
        self._deltas = self._conditionals(n).solve(len(self._states), delta)
        self._covariances = None

    def _delta(self, key: int) -> np.ndarray:
        return self._deltas[self._vars[key][0] - self._offset, self._columns(key)]

    def _relinearize(self, n_old: int) -> bool:
        """Move the linearization points of the states after the first ``n_old`` (the update's new ones) to
        their solution if a variable's update exceeds its threshold; True if they moved."""
        if np.all(np.abs(self._deltas[n_old:]) <= np.array([s.thresholds for s in self._states[n_old:]])):
            return False
        new_keys = [key for s in self._states[n_old:] for key in s.keys]
        poses = [key for key in new_keys if self._vars[key][1]]
        if poses:
            moved = pose3_retract_np(np.array([self.theta[key] for key in poses]),
                                     np.array([self._delta(key) for key in poses]))
            self.theta.update(zip(poses, moved))
        for key in new_keys:
            if not self._vars[key][1]:
                self.theta[key] = self.theta[key] + self._delta(key)
        self._deltas[n_old:] = 0.0
        return True

    def _move_frontier(self, j: int, carried: np.ndarray) -> np.ndarray:
        """Move the linearization point of window state ``j``, the frontier before this update, to its estimate
        if any component of its update exceeds its threshold (as the new states'); returns ``carried``, the frontier's
        square-root information [R | d] on it, about the new point.

        With the new point theta' = theta (+) delta_j the state's update about it is delta' = delta - delta_j
        (to first order in delta' for a pose, the chart change of GTSAM's fixed-lag smoothers' linear
        containers), so d of the frontier becomes d - R delta_j and a of the conditional of state j - 1,
        ``delta_j-1 + G delta_j = a``, becomes a - G delta_j; nothing else about the window changes.

        Why: the impulse factor between the frontier and the first new state is linearized at the frontier's
        point. Over a state's correction (a fraction of an encoder count) the joints' rows, 1/eps heavy, are far
        from linear: with rigid joints (eps_lin 1e-10 m/N) one pass left the impulse rows' whitened residual at
        its solution near 1e7 where its linear model said 1e-3 (1e-1 at eps_lin 1e-5), and the stream drifted
        0.02 rad from the truth. Moving the frontier's point with the new states' until the update is below the
        thresholds converges the update's factors as a Gauss-Newton solve of their window (the elimination
        itself is accurate: in 250-bit arithmetic it gives the same estimates to three digits).
        """
        s = self._states[j]
        delta = self._deltas[j].copy()
        if not np.any(np.abs(delta) > s.thresholds):
            return carried
        for key in s.keys:
            cols = s.columns[key]
            if self._vars[key][1]:
                self.theta[key] = pose3_retract_np(self.theta[key][None], delta[cols][None])[0]
            else:
                self.theta[key] = self.theta[key] + delta[cols]
        carried = carried.copy()
        carried[:, s.dim] -= carried[:, : s.dim] @ delta
        if j > 0:
            self._conditionals(s.dim).shift(j - 1, delta)
        self._deltas[j] = 0.0
        self._covariances = None
        return carried

    def _marginalize(self) -> None:
        now = self._states[-1].stamp
        n_old = 0
        while n_old < len(self._states) - 1 and self._states[n_old].stamp < now - self.lag:
            n_old += 1
        for s in self._states[:n_old]:
            for key in s.keys:
                del self.theta[key]
                del self._vars[key]
        del self._states[:n_old]
        if self._band is not None:
            self._band.drop(n_old)
        self._deltas = self._deltas[n_old:]
        self._covariances = None
        self._offset += n_old

    def joint_covariance(self, key_list: Sequence[int]) -> np.ndarray:
        """Joint marginal covariance of the variables ``key_list`` (all of one window state) in their
        tangent coordinates, blocks in that order.

        Backward from the frontier, ``Sigma_N = (R_f^T R_f)^-1`` and, through each conditional
        ``R_j delta_j + S_j delta_j+1 = d_j`` (``G_j = R_j^-1 S_j``),
        ``Sigma_j = R_j^-1 R_j^-T + G_j Sigma_j+1 G_j^T`` (the smoothed covariances of a chain, as in
        Rauch-Tung-Striebel), once per update for the whole window.
        """
        number = {self._vars[key][0] for key in key_list if key in self._vars}
        if len(number) != 1 or any(key not in self._vars for key in key_list):
            raise ChainError("joint_covariance takes the variables of one window state")
        if self._covariances is None:
            assert self._frontier is not None
            n = self._states[-1].dim
            R_inv = np.linalg.inv(self._frontier[:, :n])
            sigma = R_inv @ R_inv.T
            covariances = [sigma]
            band = self._conditionals(n)
            for j in range(len(self._states) - 2, -1, -1):
                R_j, G_j = self._states[j].R, band.G(j)
                assert R_j is not None
                R_inv = np.linalg.inv(R_j)
                sigma = R_inv @ R_inv.T + G_j @ sigma @ G_j.T
                covariances.append(sigma)
            self._covariances = covariances[::-1]
        sigma = self._covariances[number.pop() - self._offset]
        idx = np.concatenate([np.arange(self._columns(key).start, self._columns(key).stop) for key in key_list])
        return sigma[np.ix_(idx, idx)]

    # ------------------------------------------------------------------ read-out
    def estimates(self, state_keys: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        """The estimates of whole window states at once: poses T_world_body (K, nb, 4, 4) [m] and
        velocities (K, d) of the K states whose keys are ``state_keys`` (each: nb Pose3 keys, then one
        Vector key); the same as :meth:`calculateEstimatePose3` per pose, in one vectorized retraction."""
        theta, states = self.theta, self._states
        T = np.array([[theta[key] for key in ks[:-1]] for ks in state_keys])
        n_states, nb = T.shape[:2]
        xi = np.empty((n_states, nb, 6))
        v = np.empty((n_states, len(theta[state_keys[0][-1]])))
        for r, ks in enumerate(state_keys):  # (the keys' window rows and columns, as _delta finds them)
            j = self._vars[ks[0]][0] - self._offset
            delta, columns = self._deltas[j], states[j].columns
            for i, key in enumerate(ks[:-1]):
                xi[r, i] = delta[columns[key]]
            v[r] = theta[ks[-1]] + delta[columns[ks[-1]]]
        return pose3_retract_np(T.reshape(-1, 4, 4), xi.reshape(-1, 6)).reshape(n_states, nb, 4, 4), v

    def calculateEstimatePose3(self, key: int) -> gtsam.Pose3:  # noqa: N802 - GTSAM's name
        return gtsam.Pose3(self.theta[key]).retract(self._delta(key))

    def calculateEstimateVector(self, key: int) -> np.ndarray:  # noqa: N802
        return self.theta[key] + self._delta(key)
