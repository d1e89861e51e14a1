"""The humanoid body: skeleton constants, 75-D frame layout, forward kinematics, link shapes,
the body record physics builds (:class:`BodyModel`), bodies read from a folder in the
reference release's format (:func:`load_body_asset`)."""

from humanclaw_gym.body.asset import BodyAsset, BodyAssetError, load_body_asset
from humanclaw_gym.body.model import BodyModel, LinkMesh, skeleton_body
from humanclaw_gym.body.skeleton import (
    BODY_GROUPS,
    EYE_OFFSET_IN_HEAD_M,
    FRAME_DIM,
    JOINT_INDEX,
    JOINT_NAMES,
    NUM_JOINTS,
    PARENTS,
    PELVIS_SEAT_OFFSET_M,
    REST_JOINTS_M,
    STANDING_PELVIS_HEIGHT_M,
    LinkShape,
    forward_kinematics,
    frame_from_parts,
    heading_yaw,
    joint_body_group,
    link_shapes,
    neutral_body22_m,
    split_frame,
)

__all__ = [
    "BODY_GROUPS",
    "EYE_OFFSET_IN_HEAD_M",
    "FRAME_DIM",
    "JOINT_INDEX",
    "JOINT_NAMES",
    "NUM_JOINTS",
    "PARENTS",
    "PELVIS_SEAT_OFFSET_M",
    "REST_JOINTS_M",
    "STANDING_PELVIS_HEIGHT_M",
    "BodyAsset",
    "BodyAssetError",
    "BodyModel",
    "LinkMesh",
    "LinkShape",
    "forward_kinematics",
    "frame_from_parts",
    "heading_yaw",
    "joint_body_group",
    "link_shapes",
    "load_body_asset",
    "neutral_body22_m",
    "skeleton_body",
    "split_frame",
]
