"""Installation report: which backends and extras are usable here, and what the defaults pick.

:func:`installation_report` answers three questions without importing any simulator,
renderer or model library into the calling process:

1. **What is installed?** Versions come from package metadata (``importlib.metadata``) and
   presence from ``importlib.util.find_spec``; neither runs the package's code.
2. **Does it actually work?** Three things fail in ways metadata cannot show (a binary
   wheel that does not load, a missing libEGL, an ffmpeg binary that does not run), so they
   are tried in child processes with a timeout: a crash or a hang there is reported, never
   suffered by the caller.
3. **What would the env use by default, and why?** Physics ``pybullet``; renderer
   ``auto`` = moderngl when an EGL context can be made, else pybullet's TinyRenderer, with
   the reason; motion ``procedural`` (and whether the learned ``flow`` generator could run).

``ok`` is True when the default configuration can run: pybullet works, some renderer is
available, and the ffmpeg binary that video writing uses runs. Otherwise ``missing`` names
each missing piece and how to get it.

Names in ``hide`` (or the comma-separated environment variable ``HUMANCLAW_DOCTOR_HIDE``)
are treated as absent: a way to see what the report would say on a machine without them.

The report always gives the mesh cache (directory, entries, bytes); with a
``scene_dataset`` it also checks that dataset: the scenes its config lists, and every
object config and mesh asset those scenes refer to (files are looked up, not parsed), so a
missing HSSD mesh shows here rather than at an episode's reset.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "HIDE_ENV_VAR",
    "PACKAGES",
    "PackageInfo",
    "format_report",
    "hideable_names",
    "installation_report",
]

REPORT_SCHEMA = "humanclaw_doctor_v2"
HIDE_ENV_VAR = "HUMANCLAW_DOCTOR_HIDE"
_DEFAULT_TIMEOUT_S = 30.0
_PROBE_PREFIX = "HUMANCLAW_PROBE "


@dataclass(frozen=True)
class PackageInfo:
    """One package the doctor checks.

    Attributes:
        name: distribution name (as pip knows it).
        module: import name checked with ``find_spec``.
        role: ``"core"`` (a base dependency), ``"required"`` (needed by the defaults) or
            ``"optional"``.
        extra: the ``humanclaw-gym[...]`` extra that installs it, if any.
        purpose: what it is used for.
    """

    name: str
    module: str
    role: str
    extra: str | None
    purpose: str


PACKAGES: tuple[PackageInfo, ...] = (
    PackageInfo("gymnasium", "gymnasium", "core", None, "environment API"),
    PackageInfo("numpy", "numpy", "core", None, "arrays"),
    PackageInfo("scipy", "scipy", "core", None, "navigation grid, rotations"),
    PackageInfo("tyro", "tyro", "core", None, "command line"),
    PackageInfo("pillow", "PIL", "core", None, "images, maps"),
    PackageInfo("imageio", "imageio", "core", None, "video writing"),
    PackageInfo("imageio-ffmpeg", "imageio_ffmpeg", "required", None, "ffmpeg binary for MP4"),
    PackageInfo("pybullet", "pybullet", "required", None, "half-physics; TinyRenderer fallback"),
    PackageInfo("moderngl", "moderngl", "optional", "render", "default renderer (EGL)"),
    PackageInfo(
        "glcontext", "glcontext", "optional", "render", "headless EGL context for moderngl"
    ),
    PackageInfo("torch", "torch", "optional", "torch", "flow motion generator, learned policies"),
    PackageInfo("openai", "openai", "optional", "openai", "OpenAI-compatible agent transport"),
    PackageInfo("ray", "ray", "optional", "ray", "parallel evaluation runner"),
    PackageInfo("viser", "viser", "optional", "viewer", "browser debug viewer"),
    PackageInfo("smplx", "smplx", "optional", "smplx", "SMPL-X body model"),
    PackageInfo("trimesh", "trimesh", "optional", "hssd", "mesh scenes (HSSD scene datasets)"),
    PackageInfo("mujoco", "mujoco", "optional", "mujoco", "physics='mujoco' backend"),
    PackageInfo(
        "numba",
        "numba",
        "optional",
        "mujoco",
        "compiled MuJoCo drive maths, GIL-free chunk stepping",
    ),
    PackageInfo("habitat-sim", "habitat_sim", "optional", None, "upstream Habitat scenes"),
    PackageInfo("matplotlib", "matplotlib", "optional", "plot", "metric plots"),
)

_PROBE_NAMES = ("egl", "ffmpeg")

# Child-process probes. Each prints one line "HUMANCLAW_PROBE <json>" on success.
_PYBULLET_PROBE = """
import json, pybullet
client = pybullet.connect(pybullet.DIRECT)
try:
    api = pybullet.getAPIVersion(physicsClientId=client)
finally:
    pybullet.disconnect(client)
print("HUMANCLAW_PROBE " + json.dumps({"api_version": api}))
"""

_EGL_PROBE = """
import json, moderngl
ctx = moderngl.create_standalone_context(backend="egl", require=330)
try:
    info = {"gl_renderer": ctx.info.get("GL_RENDERER"), "gl_version": ctx.info.get("GL_VERSION"),
            "version_code": ctx.version_code}
finally:
    ctx.release()
print("HUMANCLAW_PROBE " + json.dumps(info))
"""


def hideable_names() -> tuple[str, ...]:
    """Names accepted by ``hide``: every checked package plus ``egl`` and ``ffmpeg``."""
    return tuple(p.name for p in PACKAGES) + _PROBE_NAMES


def _hidden_set(hide: Iterable[str]) -> frozenset[str]:
    names = [str(h).strip() for h in hide]
    env = os.environ.get(HIDE_ENV_VAR, "")
    names += [n.strip() for n in env.split(",")]
    allowed = hideable_names()
    aliases = {p.module: p.name for p in PACKAGES}
    out = set()
    for name in names:
        if not name:
            continue
        canonical = aliases.get(name, name)
        if canonical not in allowed:
            raise ValueError(f"hide name {name!r} is not known: allowed {', '.join(allowed)}")
        out.add(canonical)
    return frozenset(out)


def _package_status(info: PackageInfo, hidden: frozenset[str]) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": info.name,
        "module": info.module,
        "role": info.role,
        "extra": info.extra,
        "purpose": info.purpose,
        "installed": False,
        "version": None,
        "hidden": info.name in hidden,
    }
    if entry["hidden"]:
        return entry
    try:
        entry["version"] = importlib.metadata.version(info.name)
    except importlib.metadata.PackageNotFoundError:
        entry["version"] = None
    try:
        found = importlib.util.find_spec(info.module) is not None
    except (ImportError, ValueError):
        found = False
    entry["installed"] = found
    if entry["version"] and not found:
        entry["note"] = "metadata present but the module is not importable"
    return entry


def _run_probe(code: str, timeout_s: float) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter; report success, output or how it failed."""
    env = dict(os.environ)
    env.setdefault("LP_NUM_THREADS", "1")
    start = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return {
            "ok": False,
            "detail": f"timed out after {timeout_s:g} s",
            "seconds": round(time.monotonic() - start, 3),
        }
    except OSError as exc:
        return {
            "ok": False,
            "detail": f"could not start a Python subprocess: {exc}",
            "seconds": 0.0,
        }
    seconds = round(time.monotonic() - start, 3)
    if proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:
            name = f"signal {-proc.returncode}"
        return {"ok": False, "detail": f"the probe process crashed ({name})", "seconds": seconds}
    for line in proc.stdout.splitlines():
        if line.startswith(_PROBE_PREFIX) and proc.returncode == 0:
            try:
                payload = json.loads(line[len(_PROBE_PREFIX) :])
            except ValueError:
                break
            return {"ok": True, "detail": "ok", "seconds": seconds, **payload}
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {
        "ok": False,
        "detail": f"exit code {proc.returncode}: {tail[:300]}",
        "seconds": seconds,
    }


def _ffmpeg_status(
    imageio_ffmpeg_ok: bool, hidden: frozenset[str], probe: bool, timeout_s: float
) -> dict[str, Any]:
    if "ffmpeg" in hidden:
        return {"ok": False, "path": None, "version": None, "detail": "hidden"}
    if not imageio_ffmpeg_ok:
        return {
            "ok": False,
            "path": None,
            "version": None,
            "detail": "imageio-ffmpeg is "
            + (
                "hidden"
                if "imageio-ffmpeg" in hidden
                else "not installed (pip install imageio-ffmpeg)"
            ),
        }
    try:
        import imageio_ffmpeg  # light: a path lookup, no binary is run

        exe = imageio_ffmpeg.get_ffmpeg_exe()
    except Exception as exc:  # raises RuntimeError when no binary is found
        return {"ok": False, "path": None, "version": None, "detail": f"no ffmpeg binary: {exc}"}
    if not probe:
        ok = Path(exe).exists() or shutil.which(exe) is not None
        return {
            "ok": ok,
            "path": exe,
            "version": None,
            "detail": "found (not run)" if ok else "missing",
        }
    try:
        proc = subprocess.run(
            [exe, "-hide_banner", "-version"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"ok": False, "path": exe, "version": None, "detail": f"does not run: {exc}"}
    first = (proc.stdout.splitlines() or [""])[0]
    if proc.returncode != 0:
        return {"ok": False, "path": exe, "version": None, "detail": f"exit code {proc.returncode}"}
    version = first.split(" ")[2] if first.startswith("ffmpeg version ") else first
    return {"ok": True, "path": exe, "version": version, "detail": "runs"}


def _flow_module_present() -> bool:
    spec = importlib.util.find_spec("humanclaw_gym")
    if spec is None or not spec.submodule_search_locations:
        return False
    for location in spec.submodule_search_locations:
        motion = Path(location) / "motion"
        if (motion / "flow.py").exists() or (motion / "flow" / "__init__.py").exists():
            return True
    return False


def installation_report(
    hide: Iterable[str] = (),
    *,
    probe: bool = True,
    timeout_s: float = _DEFAULT_TIMEOUT_S,
    scene_dataset: str | os.PathLike[str] | None = None,
    motion_weights: str | os.PathLike[str] | None = None,
    release_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Build the JSON-serialisable installation report.

    Args:
        hide: package names (or ``egl``, ``ffmpeg``) to treat as unavailable; added to the
            names in ``$HUMANCLAW_DOCTOR_HIDE``.
        probe: run the child-process checks (pybullet DIRECT client, EGL context, ffmpeg
            binary). Without them only metadata is reported and the EGL state is unknown.
        timeout_s: per-probe timeout in seconds (> 0).
        scene_dataset: a scene dataset to check (config file or folder); None: not checked.
        motion_weights, release_dir: the paper motion's weights directory and/or a release
            checkout (its manifest, and its ``weights/paper_fullval_v1`` by default): every
            weight file is checked for presence, size and SHA-256 (nothing is unpickled);
            both None: not checked.

    Returns:
        A dict with ``schema``, ``python``, ``humanclaw_gym``, ``packages`` (one entry per
        :data:`PACKAGES` item), ``probes`` (``pybullet``, ``egl``), ``ffmpeg``, ``defaults``
        (``physics``, ``render``, ``motion`` with the choice and the reason),
        ``mesh_cache`` (``dir``, ``entries``, ``bytes``), ``scene_dataset`` (None, or
        ``ok``, ``config``, ``scenes``, ``objects``, ``assets``, ``missing_assets``,
        ``errors``, ``detail``), ``paper_motion`` (None, or ``ok``, ``detail``,
        ``weights_dir``, ``manifest``, ``manifest_sha256``, ``files``, ``bytes``), ``ok``
        and ``missing``.

    Raises:
        ValueError: an unknown ``hide`` name or a non-positive timeout.
    """
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s <= 0:
        raise ValueError(f"timeout_s={timeout_s!r} must be a number of seconds > 0")
    hidden = _hidden_set(hide)
    packages = {p.name: _package_status(p, hidden) for p in PACKAGES}

    def have(name: str) -> bool:
        return bool(packages[name]["installed"])

    # --- probes ---------------------------------------------------------------------------
    probes: dict[str, dict[str, Any]] = {}
    if not have("pybullet"):
        detail = "hidden" if packages["pybullet"]["hidden"] else "pybullet is not installed"
        probes["pybullet"] = {"ok": False, "detail": detail, "seconds": 0.0}
    elif probe:
        probes["pybullet"] = _run_probe(_PYBULLET_PROBE, float(timeout_s))
    else:
        probes["pybullet"] = {"ok": None, "detail": "not probed (installed)", "seconds": 0.0}

    if "egl" in hidden:
        probes["egl"] = {"ok": False, "detail": "hidden", "seconds": 0.0}
    elif not (have("moderngl") and have("glcontext")):
        absent = [
            f"{n} {'hidden' if packages[n]['hidden'] else 'not installed'}"
            for n in ("moderngl", "glcontext")
            if not have(n)
        ]
        probes["egl"] = {
            "ok": False,
            "detail": f"not tried: {', '.join(absent)}",
            "seconds": 0.0,
        }
    elif probe:
        probes["egl"] = _run_probe(_EGL_PROBE, float(timeout_s))
    else:
        probes["egl"] = {"ok": None, "detail": "not probed", "seconds": 0.0}
    ffmpeg = _ffmpeg_status(have("imageio-ffmpeg"), hidden, probe, float(timeout_s))

    # --- defaults -------------------------------------------------------------------------
    pybullet_ok = probes["pybullet"]["ok"] is not False and have("pybullet")
    physics = {
        "name": "pybullet",
        "ok": pybullet_ok,
        "reason": (
            (
                f"pybullet {packages['pybullet']['version']} "
                + (
                    "opens a DIRECT client"
                    if probes["pybullet"]["ok"]
                    else "is installed (not probed)"
                )
            )
            if pybullet_ok
            else f"pybullet unusable: {probes['pybullet']['detail']}"
        ),
    }
    egl = probes["egl"]
    if egl["ok"] is True:
        render_name: str | None = "moderngl"
        render_reason = f"auto: moderngl on EGL ({egl.get('gl_renderer')})"
    elif egl["ok"] is None:
        render_name = "moderngl"
        render_reason = "auto: moderngl if an EGL context can be created (not probed), else tiny"
    elif pybullet_ok:
        render_name = "tiny"
        render_reason = f"auto: falls back to tiny (pybullet TinyRenderer) because moderngl is unavailable: {egl['detail']}"
    else:
        render_name = None
        render_reason = f"no renderer: moderngl unavailable ({egl['detail']}) and the tiny fallback needs pybullet"
    render = {
        "requested": "auto",
        "name": render_name,
        "ok": render_name is not None,
        "reason": render_reason,
    }

    flow_module = _flow_module_present()
    flow_available = have("torch") and flow_module
    if flow_available:
        flow_reason = f"flow available (torch {packages['torch']['version']})"
    elif not have("torch"):
        flow_reason = (
            "flow unavailable: torch is not installed (pip install 'humanclaw-gym[torch]')"
        )
    else:
        flow_reason = "flow unavailable: this installation has no flow motion module"
    motion = {
        "name": "procedural",
        "ok": True,
        "reason": "procedural synthesizer (numpy only); " + flow_reason,
        "flow_available": flow_available,
    }

    missing: list[str] = []
    for pkg in PACKAGES:
        if pkg.role == "core" and not have(pkg.name):
            missing.append(f"{pkg.name} ({pkg.purpose}): not installed; reinstall humanclaw-gym")
    if not physics["ok"]:
        hint = "" if packages["pybullet"]["hidden"] else "; pip install pybullet"
        missing.append(f"pybullet (physics): {probes['pybullet']['detail']}{hint}")
    if not render["ok"]:
        missing.append(
            "a renderer: moderngl needs 'humanclaw-gym[render]' plus libEGL, the tiny fallback "
            "needs pybullet"
        )
    if not ffmpeg["ok"]:
        missing.append(f"ffmpeg (video, imageio-ffmpeg's binary): {ffmpeg['detail']}")
    dataset = (
        None if scene_dataset is None else _scene_dataset_status(scene_dataset, have("trimesh"))
    )
    if dataset is not None and not dataset["ok"]:
        missing.append(f"scene dataset {scene_dataset}: {dataset['detail']}")
    paper = None
    if motion_weights is not None or release_dir is not None:
        from humanclaw_gym.motion.paper.manifest import check_weights

        paper = check_weights(motion_weights, release_dir)
        if not have("torch"):
            paper["detail"] += "; running them needs torch (pip install 'humanclaw-gym[torch]')"
        if not paper["ok"]:
            missing.append(f"paper motion weights: {paper['detail']}")

    return {
        "schema": REPORT_SCHEMA,
        "registered": registered(),
        "python": {
            "version": platform.python_version(),
            "executable": sys.executable,
            "platform": platform.platform(),
        },
        "humanclaw_gym": _self_version(),
        "hidden": sorted(hidden),
        "packages": packages,
        "probes": probes,
        "ffmpeg": ffmpeg,
        "defaults": {"physics": physics, "render": render, "motion": motion},
        "mesh_cache": _mesh_cache_status(),
        "scene_dataset": dataset,
        "paper_motion": paper,
        "ok": not missing,
        "missing": missing,
    }


def _mesh_cache_status() -> dict[str, Any]:
    from humanclaw_gym.scenes.meshes import cache_size_bytes, mesh_cache_dir

    root = mesh_cache_dir()
    entries, size = cache_size_bytes()
    return {"dir": None if root is None else str(root), "entries": entries, "bytes": size}


def _scene_dataset_status(path: str | os.PathLike[str], trimesh_installed: bool) -> dict[str, Any]:
    """Scenes, configs and assets of a scene dataset (see :meth:`SceneDataset.asset_report`)."""
    from humanclaw_gym.scenes.hssd import SceneDatasetError, open_scene_dataset

    out: dict[str, Any] = {"path": str(path), "ok": False, "config": None}
    try:
        dataset = open_scene_dataset(path)
    except SceneDatasetError as exc:
        out["detail"] = str(exc)
        return out
    report = dataset.asset_report()
    out.update(
        config=str(dataset.config_path),
        scenes=report["scenes"],
        objects=report["objects"],
        configs=report["configs"],
        assets=report["assets"],
        missing_assets=len(report["missing"]),
        missing_examples=report["missing"][:5],
        errors=report["errors"][:5],
        error_count=len(report["errors"]),
    )
    problems = []
    if not report["scenes"]:
        problems.append("its config lists no scene instance")
    if report["missing"]:
        problems.append(f"{len(report['missing'])} of {report['assets']} mesh assets missing")
    if report["errors"]:
        problems.append(f"{len(report['errors'])} unreadable or malformed files")
    if not trimesh_installed:
        problems.append("trimesh is not installed (pip install 'humanclaw-gym[hssd]')")
    out["ok"] = not problems
    out["detail"] = "; ".join(problems) or (
        f"{report['scenes']} scenes, {report['objects']} objects, {report['assets']} assets found"
    )
    return out


#: The modules whose import registers the package's own entries (the registry imports
#: nothing of the package itself); reading them imports no simulator, renderer or torch.
_REGISTERING_MODULES: tuple[str, ...] = (
    "humanclaw_gym.skills",
    "humanclaw_gym.sensors",
    "humanclaw_gym.metrics.trackers",
    "humanclaw_gym.backends.registry",
    "humanclaw_gym.evaluation.policies",
)


def registered() -> dict[str, list[dict[str, Any]]]:
    """Everything registered in :mod:`humanclaw_gym.registry`, per kind in its order
    (:func:`humanclaw_gym.registry.describe`): ``name``, ``where`` (``module:attr``),
    ``source`` (``"code"`` or ``"entry point"``) and ``description``; a renderer also says
    whether ``renderer="auto"`` tries it (``in_auto``). Lazy entries are not imported."""
    import importlib

    from humanclaw_gym import registry

    for module in _REGISTERING_MODULES:
        importlib.import_module(module)
    out = registry.describe()
    for item in out["render"]:
        item["in_auto"] = bool(registry.get("render", item["name"]).meta.get("in_auto", False))
    return out


def _self_version() -> str | None:
    try:
        return importlib.metadata.version("humanclaw-gym")
    except importlib.metadata.PackageNotFoundError:
        return None


def format_report(report: dict[str, Any]) -> str:
    """Render a report from :func:`installation_report` as a plain-text table."""
    py = report["python"]
    lines = [
        f"humanclaw-gym {report['humanclaw_gym'] or '(not installed)'} on Python {py['version']} "
        f"({py['platform']})",
    ]
    if report["hidden"]:
        lines.append(f"treated as absent: {', '.join(report['hidden'])}")
    lines += ["", "packages"]
    rows = []
    for entry in report["packages"].values():
        if entry["hidden"]:
            status = "hidden"
        elif entry["installed"]:
            status = "ok"
        else:
            status = "MISSING" if entry["role"] != "optional" else "-"
        role = entry["role"] + (f" [{entry['extra']}]" if entry["extra"] else "")
        rows.append((entry["name"], entry["version"] or "-", status, role, entry["purpose"]))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        lines.append("  " + "  ".join(row[i].ljust(widths[i]) for i in range(4)) + "  " + row[4])

    lines += ["", "checks"]
    checks = [
        ("pybullet DIRECT client", report["probes"]["pybullet"]),
        ("EGL OpenGL 3.3 context", report["probes"]["egl"]),
    ]
    for label, result in checks:
        state = {True: "ok", False: "FAILED", None: "?"}[result["ok"]]
        detail = result["detail"]
        if result["ok"] and "gl_renderer" in result:
            detail = f"{result['gl_renderer']}, {result['gl_version']}"
        lines.append(f"  {label:<24}{state:<8}{detail} ({result['seconds']:.2f} s)")
    ff = report["ffmpeg"]
    ff_detail = f"{ff['version'] or ''} {ff['path'] or ''}".strip() if ff["ok"] else ff["detail"]
    lines.append(f"  {'ffmpeg binary':<24}{'ok' if ff['ok'] else 'FAILED':<8}{ff_detail}")

    lines += ["", "registered"]
    for kind, items in report.get("registered", {}).items():
        if not items:
            lines.append(f"  {kind:<9}(none registered)")
        for item in items:
            notes = [n for n in (item["description"],) if n]
            if item.get("in_auto"):
                notes.append("(tried by auto)")
            if item["source"] != "code":
                notes.append(f"({item['source']}: {item['where']})")
            lines.append(f"  {kind:<9}{item['name']:<16}{' '.join(notes)}".rstrip())

    lines += ["", "defaults"]
    for kind, choice in report["defaults"].items():
        lines.append(f"  {kind:<9}{str(choice['name']):<12}{choice['reason']}")
    cache = report.get("mesh_cache")
    if cache is not None:
        where = cache["dir"] or "disabled (HUMANCLAW_CACHE_DIR=off)"
        lines += [
            "",
            f"mesh cache  {where}: {cache['entries']} meshes, {cache['bytes'] / 1e6:.1f} MB",
        ]
    ds = report.get("scene_dataset")
    if ds is not None:
        lines += ["", "scene dataset"]
        lines.append(f"  {'config':<16}{ds.get('config') or ds['path']}")
        lines.append(f"  {'state':<16}{'ok' if ds['ok'] else 'FAILED'}: {ds['detail']}")
        if ds.get("config"):
            lines.append(
                f"  {'found':<16}{ds['scenes']} scenes, {ds['objects']} object instances, "
                f"{ds['configs']} configs, {ds['assets']} mesh assets"
            )
            lines.append(f"  {'missing assets':<16}{ds['missing_assets']}")
            lines += [f"    {m}" for m in ds["missing_examples"]]
            lines += [f"  error: {e}" for e in ds["errors"]]
    paper = report.get("paper_motion")
    if paper is not None:
        lines += ["", "paper motion weights"]
        lines.append(f"  {'weights':<16}{paper.get('weights_dir')}")
        lines.append(f"  {'manifest':<16}{paper.get('manifest')}")
        lines.append(f"  {'state':<16}{'verified' if paper['ok'] else 'FAILED'}: {paper['detail']}")
    lines.append("")
    if report["ok"]:
        lines.append("result: OK, the default configuration can run")
    else:
        lines.append("result: NOT READY, missing:")
        lines += [f"  - {m}" for m in report["missing"]]
    return "\n".join(lines)
