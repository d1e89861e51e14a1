"""A user's SMPL-X body model read through the ``smplx`` package: posing and skinning.

The SMPL-X model files are licensed and are not shipped; everything here needs a directory
``body_model_dir`` that holds them (``SMPLX_NEUTRAL.npz`` etc., as downloaded) and the
optional extras ``pip install 'humanclaw-gym[smplx,torch]'``. Without them nothing in the
package changes.

* :class:`SmplxBody`: loads one SMPL-X body with ``smplx.create`` (no PCA hands, flat hand
  mean) and runs it in fixed-size batches.
* :func:`smplx_vertices`: the skinned SMPL-X mesh of a 75-D frame (world vertices + faces),
  drawn instead of the link shapes when the env is made with ``body_model_dir=``.
* :func:`read_body_model_arrays`: the arrays of a user's model file, read without ever
  unpickling anything (``smplx`` itself opens ``.npz`` files with ``allow_pickle=True`` and
  ``.pkl`` files with ``pickle.load``, which runs whatever code a crafted file holds).
  :class:`SmplxBody` hands ``smplx`` a clean copy of these arrays, never the user's file.

Mocap clips are converted to frames and training chunks with the same body in
:mod:`humanclaw_gym.motion.flow.smplx_io`.

Conventions: the 75-D frame is ``[pelvis position (3), root axis-angle (3), 23 joint
axis-angles (69)]`` in SMPL joint order. Its first 21 joints are SMPL-X's 21 body joints,
so ``pose_body`` maps one to one; SMPL's two hand joints (22, 23) are zero (fingers stay
flat). SMPL-X rotates the body about its pelvis joint ``J0(betas)`` and adds ``transl``, so
the world pelvis is ``J0 + transl``. The body's landmark/keypoint vertices (nose, toes,
fingertips) are not used, so the vertex keypoint selection is switched off.
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from humanclaw_gym.body.skeleton import FRAME_DIM

__all__ = [
    "SMPLX_BODY_JOINTS",
    "SMPLX_HAND_JOINTS",
    "SMPLX_MODEL_ARRAYS",
    "BodyModelError",
    "SmplxBody",
    "body_model_file",
    "read_body_model_arrays",
    "smplx_vertices",
]

#: SMPL-X joints standing in for SMPL's left/right hand joints (middle-finger bases).
SMPLX_HAND_JOINTS = (28, 43)
#: SMPL-X body joints after the pelvis (``pose_body`` holds 3 values each).
SMPLX_BODY_JOINTS = 21
_NUM_BODY_JOINTS = SMPLX_BODY_JOINTS
_BATCH = 64


#: Arrays ``smplx`` reads from a SMPL-X model file (``data_struct.<name>``).
SMPLX_MODEL_ARRAYS: tuple[str, ...] = (
    "J_regressor",
    "dynamic_lmk_bary_coords",
    "dynamic_lmk_faces_idx",
    "f",
    "hands_componentsl",
    "hands_componentsr",
    "hands_meanl",
    "hands_meanr",
    "kintree_table",
    "lmk_bary_coords",
    "lmk_faces_idx",
    "posedirs",
    "shapedirs",
    "v_template",
    "weights",
)


class BodyModelError(ValueError):
    """A body model file cannot be used (it would need unpickling Python objects, or it is
    not a model file); the message names the file and what is allowed."""


class _ArraysOnlyUnpickler(pickle.Unpickler):
    """Rebuilds numpy arrays and scipy sparse matrices, and nothing else: every other
    class or function a pickle names is refused before it could be called."""

    _NUMPY = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("copyreg", "_reconstructor"),
        ("builtins", "object"),
        ("_codecs", "encode"),  # how protocol 2 pickles byte strings (array buffers)
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._NUMPY or (
            module.startswith("scipy.sparse") and name.endswith(("_matrix", "_array"))
        ):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not an array type")


def read_body_model_arrays(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """The arrays of a SMPL-X model file, read without running any code from it.

    ``.npz``: read with ``allow_pickle=False``; a member holding pickled objects is refused
    when ``smplx`` needs it (:data:`SMPLX_MODEL_ARRAYS`) and left unread otherwise.
    ``.pkl``: unpickled with an allow-list of numpy array and scipy sparse types only;
    sparse matrices become dense arrays, values that are no arrays (names, dicts) are
    dropped.

    Raises:
        BodyModelError: naming the file (and the member) and what is allowed.
    """
    file = Path(path)
    allowed = "plain numeric arrays, as in the SMPL-X download (no pickled Python objects)"
    arrays: dict[str, np.ndarray] = {}
    if file.suffix == ".pkl":
        try:
            with open(file, "rb") as handle:
                data = _ArraysOnlyUnpickler(handle, encoding="latin1").load()
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError) as exc:
            raise BodyModelError(f"{file}: refused ({exc}); allowed: {allowed}") from None
        if not isinstance(data, dict):
            raise BodyModelError(f"{file}: holds a {type(data).__name__}, not a dict of arrays")
        for key, value in data.items():
            if hasattr(value, "toarray"):  # scipy sparse
                value = value.toarray()
            if isinstance(value, np.ndarray) and not value.dtype.hasobject:
                arrays[str(key)] = value
    else:
        try:
            with np.load(file, allow_pickle=False) as data:
                if not isinstance(data, np.lib.npyio.NpzFile):
                    raise BodyModelError(f"{file}: a single array, not an .npz model file")
                for key in data.files:
                    try:
                        arrays[key] = data[key]
                    except ValueError:  # "Object arrays cannot be loaded ..."
                        if key in SMPLX_MODEL_ARRAYS:
                            raise BodyModelError(
                                f"{file}: member {key!r} holds pickled Python objects (loading "
                                f"it could run code); allowed: {allowed}"
                            ) from None
        except BodyModelError:
            raise
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
            raise BodyModelError(f"{file}: not a readable .npz model file ({exc})") from None
    return arrays


def body_model_file(
    body_model_dir: str | os.PathLike[str], gender: str = "neutral", ext: str = "npz"
) -> Path:
    """The model file of ``gender`` in ``body_model_dir`` (or ``body_model_dir`` itself when
    it is a file).

    Raises:
        FileNotFoundError: naming the expected file.
    """
    path = Path(body_model_dir)
    file = path / f"SMPLX_{gender.upper()}.{ext}" if path.is_dir() else path
    if not file.is_file():
        raise FileNotFoundError(
            f"SMPL-X model file {str(file)!r} not found: pass --body-model-dir pointing at "
            "the licensed SMPL-X files (they are not shipped with humanclaw-gym)"
        )
    return file


def _import_smplx() -> tuple[Any, Any]:
    try:
        import smplx
        import torch
    except ImportError as exc:
        raise ImportError(
            "SMPL-X support needs the 'smplx' and 'torch' extras: "
            "pip install 'humanclaw-gym[smplx,torch]'"
        ) from exc
    return smplx, torch


class SmplxBody:
    """One SMPL-X body model from the user's licensed files.

    Args:
        body_model_dir: directory with ``SMPLX_<GENDER>.npz`` (or ``.pkl``), or the file.
        gender: ``"neutral"``, ``"male"`` or ``"female"``.
        num_betas: shape coefficients used (<= those in the file).
        ext: ``"npz"`` or ``"pkl"``.

    Raises:
        FileNotFoundError: naming the expected file when it is missing.
    """

    def __init__(
        self,
        body_model_dir: str | os.PathLike[str],
        gender: str = "neutral",
        num_betas: int = 10,
        ext: str = "npz",
    ):
        smplx, torch = _import_smplx()
        if gender not in ("neutral", "male", "female"):
            raise ValueError(f"gender={gender!r} is invalid: allowed 'neutral' | 'male' | 'female'")
        if ext not in ("npz", "pkl"):
            raise ValueError(f"ext={ext!r} is invalid: allowed 'npz' | 'pkl'")
        file = body_model_file(body_model_dir, gender, ext)
        self._arrays = read_body_model_arrays(file)  # never unpickles (see the function)
        self._gender = gender
        self._torch = torch
        self._smplx = smplx
        self.num_betas = int(num_betas)
        self._create_kwargs = dict(
            model_type="smplx",
            gender=gender,
            ext="npz",  # smplx reads our clean copy of the arrays, never the user's file
            num_betas=self.num_betas,
            use_pca=False,
            flat_hand_mean=True,
            use_face_contour=False,
            use_hands=False,
            use_feet_keypoints=False,
        )
        self.file = file
        self.model = self._create(_BATCH)
        self._single: Any = None  # a batch-1 copy, built on first use (one frame per render)
        self._rest_pelvis: dict[bytes, np.ndarray] = {}
        self.faces = np.asarray(self.model.faces, dtype=np.int64)

    def _create(self, batch_size: int) -> Any:
        # smplx only takes a path and opens it with allow_pickle=True: give it a private
        # copy that holds nothing but the arrays read safely from the user's file.
        directory = tempfile.mkdtemp(prefix="humanclaw_smplx_")
        try:
            clean = Path(directory) / f"SMPLX_{self._gender.upper()}.npz"
            np.savez(clean, **self._arrays)
            model = self._smplx.create(
                str(clean), batch_size=batch_size, **self._create_kwargs
            ).eval()
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        # Only the 55 skeleton joints are read: drop the vertex keypoints (nose, eyes, ears).
        model.vertex_joint_selector.extra_joints_idxs = self._torch.zeros(0, dtype=self._torch.long)
        return model

    def rest_pelvis(self, betas: np.ndarray | None = None) -> np.ndarray:
        """Pelvis joint ``J0`` of the shaped body in the model frame, ``float64 (3,)``
        (cached per shape)."""
        key = self._betas(betas).tobytes()
        if key not in self._rest_pelvis:
            out = self.run(np.zeros((1, 3)), np.zeros((1, 63)), np.zeros((1, 3)), betas)
            self._rest_pelvis[key] = out["joints"][0, 0]
        return self._rest_pelvis[key].copy()

    def _betas(self, betas: np.ndarray | None) -> np.ndarray:
        b = np.zeros(self.num_betas)
        if betas is not None:
            given = np.asarray(betas, dtype=np.float64).reshape(-1)[: self.num_betas]
            b[: len(given)] = given
        return b

    def run(
        self,
        root_orient: np.ndarray,
        pose_body: np.ndarray,
        transl: np.ndarray,
        betas: np.ndarray | None = None,
        vertices: bool = False,
    ) -> dict[str, np.ndarray]:
        """Pose the body for ``T`` frames (in the model's own frame).

        Args:
            root_orient: ``(T, 3)`` global axis-angle.
            pose_body: ``(T, 63)`` 21 body-joint axis-angles.
            transl: ``(T, 3)`` translation.
            betas: ``(num_betas,)`` shape (zeros when None; longer vectors are cut).
            vertices: also return the skinned vertices.

        Returns:
            ``{"joints": (T, J, 3)}`` (and ``"vertices": (T, V, 3)``), float64.
        """
        torch = self._torch
        root_orient = np.asarray(root_orient, dtype=np.float64).reshape(-1, 3)
        n = len(root_orient)
        pose_body = np.asarray(pose_body, dtype=np.float64).reshape(n, 3 * _NUM_BODY_JOINTS)
        transl = np.asarray(transl, dtype=np.float64).reshape(n, 3)
        b = self._betas(betas)
        joints, verts = [], []
        batch, model = _BATCH, self.model
        if n == 1:  # one frame (e.g. one render): a batch-1 model, not 63 padded rows
            if self._single is None:
                self._single = self._create(1)
            batch, model = 1, self._single
        with torch.no_grad():
            for s in range(0, n, batch):
                m = min(batch, n - s)
                pad = batch - m

                def t(a: np.ndarray, s: int = s, m: int = m, pad: int = pad) -> Any:
                    a = np.concatenate([a[s : s + m], np.zeros((pad,) + a.shape[1:])])
                    return torch.as_tensor(a, dtype=torch.float32)

                out = model(
                    global_orient=t(root_orient),
                    body_pose=t(pose_body),
                    transl=t(transl),
                    betas=torch.as_tensor(np.repeat(b[None], batch, 0), dtype=torch.float32),
                    return_verts=vertices,
                )
                joints.append(out.joints[:m].double().numpy())
                if vertices:
                    verts.append(out.vertices[:m].double().numpy())
        result = {"joints": np.concatenate(joints)}
        if vertices:
            result["vertices"] = np.concatenate(verts)
        return result


def smplx_vertices(
    frame_75: np.ndarray, body: SmplxBody, betas: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The skinned SMPL-X mesh of 75-D frames in the Y-up world.

    Args:
        frame_75: ``(75,)`` or ``(T, 75)`` world frames.
        body: the body model.
        betas: optional shape.

    Returns:
        ``(vertices float64 (V, 3) or (T, V, 3), faces int64 (F, 3))``; the mesh's pelvis
        joint sits exactly at the frame's pelvis position.
    """
    frames = np.asarray(frame_75, dtype=np.float64)
    single = frames.ndim == 1
    frames = frames.reshape(-1, FRAME_DIM)
    if not np.all(np.isfinite(frames)):
        raise ValueError("frame_75 must be finite")
    pelvis0 = body.rest_pelvis(betas)
    # The model frame is already Y up: the frame's root rotation applies directly, and the
    # translation places the rotated pelvis joint (J0 + transl) at the frame's pelvis.
    transl = frames[:, 0:3] - pelvis0
    out = body.run(
        frames[:, 3:6], frames[:, 6 : 6 + 3 * _NUM_BODY_JOINTS], transl, betas, vertices=True
    )
    verts = out["vertices"]
    return (verts[0] if single else verts), body.faces.copy()
