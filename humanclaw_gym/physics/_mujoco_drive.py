"""Per-frame drive maths of the MuJoCo backend, as scalar loops that numba can compile.

One generated 30 Hz frame needs about twenty quaternion operations on 24 rotations: the
root velocity and angular drive, the PJSC command of every joint, the joint velocity drive
and the actuator targets of the four substeps. In numpy that costs more than MuJoCo's own
stepping (small-array overhead), so the maths is written here once as plain loops over
scalars. With ``numba`` installed (the ``mujoco`` extra) the functions are compiled on first
use (``cache=True``: later processes load the compiled code from ``__pycache__``); without
it (or with the environment variable ``HUMANCLAW_NO_NUMBA=1``, read at import) the very
same Python functions run in the interpreter, slower (measured: 16-25 ms instead of
6.5 ms of CPU time per decision step) and with the same results: the compiled code evaluates the
same expressions in the same order with the same libm functions and no fast-math, which
``tests/test_mujoco_backend.py`` checks bit for bit.

Quaternions are ``xyzw`` in our arrays; MuJoCo's ``qpos`` stores them ``wxyz``. Conventions
and the clauses implemented are those of :mod:`humanclaw_gym.physics.pybullet_backend` and
``docs/physics.md``: rotation deltas are shortest-arc logarithms (``w >= 0``), capped at
30 degrees per frame; the PJSC command is pulled to within the cap of the realized rotation.
"""

from __future__ import annotations

import functools
import math
import os
from typing import Any

import numpy as np

__all__ = ["COMPILED", "begin_frame", "frame_runner", "read_state", "run_frames", "set_pose"]

_SMALL = 1e-12


def _maybe_jit(fn):  # pragma: no cover - exercised through both paths in the tests
    return fn


COMPILED = False
if os.environ.get("HUMANCLAW_NO_NUMBA", "") not in ("1", "true", "yes"):
    try:
        import numba

        def _maybe_jit(fn):  # noqa: F811 - the compiled variant when numba is present
            return numba.njit(cache=True, nogil=True, fastmath=False)(fn)

        COMPILED = True
    except ImportError:  # the interpreter runs the same functions
        COMPILED = False


@_maybe_jit
def _qmul(ax, ay, az, aw, bx, by, bz, bw):
    """Hamilton product ``a * b`` (xyzw scalars)."""
    return (
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    )


@_maybe_jit
def _qexp(vx, vy, vz):
    """Unit quaternion of a rotation vector (the same formula as physics.rotations)."""
    angle = math.sqrt(vx * vx + vy * vy + vz * vz)
    half = 0.5 * angle
    if angle > 1e-8:
        scale = math.sin(half) / angle
    else:
        scale = 0.5 - angle * angle / 48.0
    return vx * scale, vy * scale, vz * scale, math.cos(half)


@_maybe_jit
def _qlog(x, y, z, w):
    """Shortest-arc rotation vector of a quaternion of either sign."""
    if w < 0.0:
        x, y, z, w = -x, -y, -z, -w
    s = math.sqrt(x * x + y * y + z * z)
    angle = 2.0 * math.atan2(s, w)
    if s > _SMALL:
        scale = angle / s
    else:
        scale = 2.0 / max(w, _SMALL)
    return x * scale, y * scale, z * scale


@_maybe_jit
def _cap(vx, vy, vz, max_angle):
    angle = math.sqrt(vx * vx + vy * vy + vz * vz)
    if angle > max_angle:
        f = max_angle / angle
        return vx * f, vy * f, vz * f
    return vx, vy, vz


@_maybe_jit
def _rotate_inv(qx, qy, qz, qw, vx, vy, vz):
    """Rotate a vector by the inverse of a unit quaternion."""
    ux, uy, uz = -qx, -qy, -qz
    tx = 2.0 * (uy * vz - uz * vy)
    ty = 2.0 * (uz * vx - ux * vz)
    tz = 2.0 * (ux * vy - uy * vx)
    return (
        vx + qw * tx + (uy * tz - uz * ty),
        vy + qw * ty + (uz * tx - ux * tz),
        vz + qw * tz + (ux * ty - uy * tx),
    )


@_maybe_jit
def begin_frame(
    frame,
    prev_xz,
    prev_y,
    src,
    prev_rot,
    real_rot,
    command,
    gains,
    root_gain,
    cap,
    fps,
    qvel,
    qfrc,
    ctrl_sched,
    dof_adr,
    act_adr,
    ff_damping,
    ff_limit,
    ramp,
    v_root_xz,
    gmode,
    g_eff,
    inherit,
    h,
    frame_index,
    release_chunk,
):
    """Compute and write every drive of one generated frame (before substep 0).

    Args:
        frame: the generated ``(75,)`` frame.
        prev_xz: ``(2,)`` previous generated root x/z; overwritten with this frame's.
        prev_y: ``(1,)`` previous generated root height; overwritten with this frame's.
        src: ``(L,)`` the frame joint driving each link, -1 for a link held at rest.
        prev_rot: ``(L, 4)`` previous generated rotations (root global, joints local),
            overwritten with this frame's.
        real_rot: ``(L, 4)`` realized rotations at the start of the frame.
        command: ``(L - 1, 4)`` joint drive commands (PJSC state), updated.
        gains: ``(L - 1,)`` PJSC gains; ``root_gain``: root correction gain.
        cap: the per-frame drive cap (rad); ``fps``: generated frame rate.
        qvel, qfrc: MjData ``qvel`` / ``qfrc_applied`` (written: root x/z and angular
            velocity, joint velocities; the feed-forward of the joint damping).
        ctrl_sched: ``(4, number of actuators)`` actuator targets per substep (written).
        dof_adr: ``(L,)`` first dof of the root free joint and of each ball joint (-1 for
            a welded link the frame does not drive: ``src`` -1).
        act_adr: ``(L - 1,)`` first of the three actuators of each joint (-1 welded).
        ff_damping: ``(L - 1,)`` joint damping (N m s/rad) compensated at the drive velocity.
        ff_limit: ``(L - 1,)`` largest feed-forward torque per axis (N m): the torque cap.
        ramp: 1 to move the actuator targets along the frame's path substep by substep,
            0 to hold the command for the whole frame.
        v_root_xz: ``(2,)`` written: the root x/z velocity (also written before substep 2).
        gmode: 0 engine gravity (the root's vertical velocity is not written); 1, 2, 3 the
            reference release's root-only gravity ``"pre"``, ``"substep"``, ``"midpoint"``:
            the root's vertical velocity is set here to the generated one (plus the
            realized downward one when ``inherit`` is 1, minus ``g_eff / fps`` for ``"pre"``).
        g_eff: gravity times its scale (m/s^2); ``h``: the substep length (s).
        frame_index: ``int64 (1,)`` frames executed since reset; incremented.
        release_chunk: 0, or the chunk length of the reference release's first-frame rule
            (``release_arithmetic``): a frame whose index is a multiple of it gets no
            translation command (the previous generated position is taken as its own).
    """
    if release_chunk > 0 and frame_index[0] % release_chunk == 0:
        prev_xz[0] = frame[0]
        prev_xz[1] = frame[2]
        prev_y[0] = frame[1]
    frame_index[0] += 1
    links = prev_rot.shape[0]
    # generated rotations of this frame
    gen = np.empty((links, 4))
    for j in range(links):
        k = src[j]
        if k < 0:
            gx, gy, gz, gw = 0.0, 0.0, 0.0, 1.0
        else:
            gx, gy, gz, gw = _qexp(frame[3 + 3 * k], frame[4 + 3 * k], frame[5 + 3 * k])
        gen[j, 0] = gx
        gen[j, 1] = gy
        gen[j, 2] = gz
        gen[j, 3] = gw
    # -- root x/z velocity: generated displacement * fps
    v_root_xz[0] = (frame[0] - prev_xz[0]) * fps
    v_root_xz[1] = (frame[2] - prev_xz[1]) * fps
    # -- root angular velocity (world), blend of the generated delta and the correction
    px, py, pz, pw = prev_rot[0, 0], prev_rot[0, 1], prev_rot[0, 2], prev_rot[0, 3]
    rx, ry, rz, rw = real_rot[0, 0], real_rot[0, 1], real_rot[0, 2], real_rot[0, 3]
    gx, gy, gz, gw = gen[0, 0], gen[0, 1], gen[0, 2], gen[0, 3]
    ax, ay, az = _qlog(*_qmul(gx, gy, gz, gw, -px, -py, -pz, pw))
    bx, by, bz = _qlog(*_qmul(gx, gy, gz, gw, -rx, -ry, -rz, rw))
    g = root_gain
    wx, wy, wz = _cap(
        (1.0 - g) * ax + g * bx, (1.0 - g) * ay + g * by, (1.0 - g) * az + g * bz, cap
    )
    # free joint: linear velocity of the body origin in the world frame, angular velocity
    # in the body frame
    lx, ly, lz = _rotate_inv(rx, ry, rz, rw, wx * fps, wy * fps, wz * fps)
    qvel[dof_adr[0]] = v_root_xz[0]
    qvel[dof_adr[0] + 2] = v_root_xz[1]
    if gmode != 0:
        vy = (frame[1] - prev_y[0]) * fps
        if inherit == 1:
            vy += min(0.0, qvel[dof_adr[0] + 1])
        if gmode == 1:
            vy -= g_eff / fps
        qvel[dof_adr[0] + 1] = vy
    qvel[dof_adr[0] + 3] = lx
    qvel[dof_adr[0] + 4] = ly
    qvel[dof_adr[0] + 5] = lz
    # -- joints: PJSC command, capped and kept within the cap of the realized rotation
    for i in range(links - 1):
        j = i + 1
        if src[j] < 0:  # held at rest: welded, no dofs
            continue
        cx, cy, cz, cw = command[i, 0], command[i, 1], command[i, 2], command[i, 3]
        qx, qy, qz, qw = real_rot[j, 0], real_rot[j, 1], real_rot[j, 2], real_rot[j, 3]
        gx, gy, gz, gw = gen[j, 0], gen[j, 1], gen[j, 2], gen[j, 3]
        px, py, pz, pw = prev_rot[j, 0], prev_rot[j, 1], prev_rot[j, 2], prev_rot[j, 3]
        dx, dy, dz = _qlog(*_qmul(-px, -py, -pz, pw, gx, gy, gz, gw))  # generated delta
        ex, ey, ez = _qlog(*_qmul(-cx, -cy, -cz, cw, gx, gy, gz, gw))  # to the expected pose
        k = gains[i]
        sx, sy, sz = _cap(
            (1.0 - k) * dx + k * ex, (1.0 - k) * dy + k * ey, (1.0 - k) * dz + k * ez, cap
        )
        wx_, wy_, wz_, ww_ = _qmul(cx, cy, cz, cw, *_qexp(sx, sy, sz))  # wanted command
        lx, ly, lz = _cap(*_qlog(*_qmul(-qx, -qy, -qz, qw, wx_, wy_, wz_, ww_)), cap)
        nx, ny, nz, nw = _qmul(qx, qy, qz, qw, *_qexp(lx, ly, lz))
        command[i, 0] = nx
        command[i, 1] = ny
        command[i, 2] = nz
        command[i, 3] = nw
        # joint velocity drive: a ball joint's velocity is its child-frame angular velocity
        d0 = dof_adr[j]
        qvel[d0] = lx * fps
        qvel[d0 + 1] = ly * fps
        qvel[d0 + 2] = lz * fps
        # feed-forward of the joint damping at the drive velocity (see the backend)
        lim = ff_limit[i]
        qfrc[d0] = min(max(ff_damping[i] * lx * fps, -lim), lim)
        qfrc[d0 + 1] = min(max(ff_damping[i] * ly * fps, -lim), lim)
        qfrc[d0 + 2] = min(max(ff_damping[i] * lz * fps, -lim), lim)
        # actuator targets: the rotation vector of the realized rotation moved along the
        # frame's path (fraction k/4 before substep k), or the command itself
        a0 = act_adr[i]
        for sub in range(4):
            if ramp == 1:
                f = sub / 4.0
                tx, ty, tz = _qlog(*_qmul(qx, qy, qz, qw, *_qexp(lx * f, ly * f, lz * f)))
            else:
                tx, ty, tz = _qlog(nx, ny, nz, nw)
            ctrl_sched[sub, a0] = tx
            ctrl_sched[sub, a0 + 1] = ty
            ctrl_sched[sub, a0 + 2] = tz
    for j in range(links):
        for c in range(4):
            prev_rot[j, c] = gen[j, c]
    prev_xz[0] = frame[0]
    prev_xz[1] = frame[2]
    prev_y[0] = frame[1]


@_maybe_jit
def read_state(qpos, qpos_adr, out_pos, out_rot):
    """Read the humanoid's realized root position ``(3,)`` and rotations ``(L, 4)`` xyzw
    (row 0 the root, rows ``1..`` the joints' local rotations) from ``qpos``, normalized.

    Returns:
        False when any value is not finite (the simulation diverged).
    """
    a = qpos_adr[0]
    ok = True
    for c in range(3):
        out_pos[c] = qpos[a + c]
        if not math.isfinite(out_pos[c]):
            ok = False
    for j in range(out_rot.shape[0]):
        if qpos_adr[j] < 0:  # a welded (held) link: at rest
            out_rot[j, 0] = 0.0
            out_rot[j, 1] = 0.0
            out_rot[j, 2] = 0.0
            out_rot[j, 3] = 1.0
            continue
        b = qpos_adr[j] + (3 if j == 0 else 0)
        w, x, y, z = qpos[b], qpos[b + 1], qpos[b + 2], qpos[b + 3]
        n = math.sqrt(w * w + x * x + y * y + z * z)
        if not (math.isfinite(n) and n > 0.0):
            ok = False
            n = 1.0
        out_rot[j, 0] = x / n
        out_rot[j, 1] = y / n
        out_rot[j, 2] = z / n
        out_rot[j, 3] = w / n
    return ok


@_maybe_jit
def set_pose(frame, qpos, qpos_adr, out_rot, src):
    """Write a 75-D frame into ``qpos`` (root position and every link's rotation, wxyz;
    ``src``: the frame joint of each link, -1 for the identity) and the rotations
    ``(L, 4)`` xyzw into ``out_rot``."""
    a = qpos_adr[0]
    for c in range(3):
        qpos[a + c] = frame[c]
    for j in range(out_rot.shape[0]):
        k = src[j]
        if k < 0:
            x, y, z, w = 0.0, 0.0, 0.0, 1.0
        else:
            x, y, z, w = _qexp(frame[3 + 3 * k], frame[4 + 3 * k], frame[5 + 3 * k])
        out_rot[j, 0] = x
        out_rot[j, 1] = y
        out_rot[j, 2] = z
        out_rot[j, 3] = w
        if qpos_adr[j] < 0:  # a welded (held) link
            continue
        b = qpos_adr[j] + (3 if j == 0 else 0)
        qpos[b] = w
        qpos[b + 1] = x
        qpos[b + 2] = y
        qpos[b + 3] = z


# --------------------------------------------------------------------------------------
# Whole frames in one compiled call, without the GIL
# --------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _libmujoco_mj_step() -> Any:
    """``mj_step(const mjModel*, mjData*)`` of the libmujoco that the ``mujoco`` package
    loaded, as a ctypes function pointer taking the two addresses as 64-bit integers (the
    x86-64 and AArch64 calling conventions pass pointers and such integers alike); None
    when the library is not found."""
    import ctypes
    import glob

    import mujoco

    names = sorted(glob.glob(os.path.join(os.path.dirname(mujoco.__file__), "libmujoco.so*")))
    if not names or ctypes.sizeof(ctypes.c_void_p) != 8:
        return None
    try:
        address = ctypes.cast(ctypes.CDLL(names[0]).mj_step, ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None
    return ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_uint64)(address)


@_maybe_jit
def run_frames(
    mj_step,
    model_addr,
    data_addr,
    frames,
    ctrl,
    qpos,
    qpos_adr,
    real_pos,
    warning_count,
    warning_kinds,
    rec_qpos,
    rec_pos,
    rec_rot,
    prev_xz,
    prev_y,
    src,
    prev_rot,
    real_rot,
    command,
    gains,
    root_gain,
    cap,
    fps,
    qvel,
    qfrc,
    ctrl_sched,
    dof_adr,
    act_adr,
    ff_damping,
    ff_limit,
    ramp,
    v_root_xz,
    gmode,
    g_eff,
    inherit,
    h,
    frame_index,
    release_chunk,
):
    """Execute ``frames (n, 75)`` in order: per frame :func:`begin_frame`, the four
    substeps (actuator targets, the root x/z velocity again before substep 2, ``mj_step``)
    and :func:`read_state`, exactly as the backend does it from Python frame by frame.

    Args:
        mj_step: libmujoco's ``mj_step`` (see :func:`frame_runner`).
        model_addr, data_addr: addresses of the ``mjModel`` and ``mjData``.
        ctrl: MjData ``ctrl``; ``qpos``: MjData ``qpos``; ``qpos_adr``, ``real_pos``: as
            for :func:`read_state` (``real_rot`` is begin_frame's, updated in place).
        warning_count: MjData ``warning.number``; ``warning_kinds``: the indices of the
            warnings after which MuJoCo resets the data (bad qpos, qvel, qacc).
        rec_qpos, rec_pos, rec_rot: ``(n, nq)``, ``(n, 3)``, ``(n, L, 4)``: row ``i``
            receives ``qpos``, ``real_pos`` and ``real_rot`` after frame ``i`` (the state
            the frame left); empty (0 rows) to record nothing.
        The rest: :func:`begin_frame`'s arguments after ``frame``, in its order.

    Returns:
        The number of frames that completed normally; ``i < n`` means frame ``i``
        diverged (a non-finite state, or MuJoCo reset the data after a bad position,
        velocity or acceleration) and nothing after it ran.
    """
    root = dof_adr[0]
    start_warnings = 0
    for k in warning_kinds:
        start_warnings += warning_count[k]
    for i in range(frames.shape[0]):
        begin_frame(
            frames[i],
            prev_xz,
            prev_y,
            src,
            prev_rot,
            real_rot,
            command,
            gains,
            root_gain,
            cap,
            fps,
            qvel,
            qfrc,
            ctrl_sched,
            dof_adr,
            act_adr,
            ff_damping,
            ff_limit,
            ramp,
            v_root_xz,
            gmode,
            g_eff,
            inherit,
            h,
            frame_index,
            release_chunk,
        )
        if gmode != 0:  # the reference release's root-only gravity: a bias per substep
            for sub in range(4):
                if sub == 2:
                    qvel[root] = v_root_xz[0]
                    qvel[root + 2] = v_root_xz[1]
                if ramp == 1:
                    ctrl[:] = ctrl_sched[sub]
                else:
                    ctrl[:] = ctrl_sched[0]
                if gmode == 3:
                    qvel[root + 1] -= 0.5 * g_eff * h
                elif gmode == 2:
                    qvel[root + 1] -= g_eff * h
                mj_step(model_addr, data_addr)
                if gmode == 3:
                    qvel[root + 1] -= 0.5 * g_eff * h
        elif ramp == 1:
            for sub in range(4):
                if sub == 2:
                    qvel[root] = v_root_xz[0]
                    qvel[root + 2] = v_root_xz[1]
                ctrl[:] = ctrl_sched[sub]
                mj_step(model_addr, data_addr)
        else:
            ctrl[:] = ctrl_sched[0]
            mj_step(model_addr, data_addr)
            mj_step(model_addr, data_addr)
            qvel[root] = v_root_xz[0]
            qvel[root + 2] = v_root_xz[1]
            mj_step(model_addr, data_addr)
            mj_step(model_addr, data_addr)
        ok = read_state(qpos, qpos_adr, real_pos, real_rot)
        warnings = 0
        for k in warning_kinds:
            warnings += warning_count[k]
        if not ok or warnings != start_warnings:
            return i
        if rec_qpos.shape[0] > 0:
            rec_qpos[i, :] = qpos
            rec_pos[i, :] = real_pos
            rec_rot[i, :, :] = real_rot
    return frames.shape[0]


def frame_runner() -> Any:
    """``runner(model_addr, data_addr, frames, ...)``: :func:`run_frames` compiled, bound to
    libmujoco's ``mj_step``, or None where it is not available (numba missing or disabled,
    libmujoco not found). The compiled loop calls the library directly and holds no GIL
    for the whole call (the bindings' ``mj_step`` gives the GIL back after every substep,
    which makes a thread wait for it 60 times per decision). Same maths, same C function,
    same order as the frame-by-frame path: bit-identical results (tested).
    """
    if not COMPILED:
        return None
    mj_step = _libmujoco_mj_step()
    if mj_step is None:
        return None
    return lambda *args: run_frames(mj_step, *args)
