"""Where text goes on the maps (``scenes render-map``, the report) and in the HTML report:
room labels on top of everything and where they hide nothing, report headers that wrap
between words only."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from scipy import ndimage

from humanclaw_gym.episodes import load_scene, load_split
from humanclaw_gym.evaluation.batch import RunConfig, list_episode_specs, rollout_dir, run_batch
from humanclaw_gym.scenes import maps

#: The colours of an episode's markers and paths.
_MARKERS = (
    maps._PATH_COLOR,
    maps._AGENT_PATH_COLOR,
    maps._START_COLOR,
    maps._TARGET_OUTLINE,
    maps._APPROACH_POINT,
)
#: Furniture and walls (rugs may lie under a label).
_FURNITURE = tuple(c for name, c in maps.CATEGORY_COLORS.items() if name != "rug")


def _count(pixels: np.ndarray, colors) -> int:
    return int(sum(np.count_nonzero(np.all(pixels == np.array(c, np.uint8), -1)) for c in colors))


def _label_boxes(image: np.ndarray) -> list[tuple[slice, slice]]:
    """The room labels of a map without legend: its pure white boxes (the floor and the
    background are tinted; a ring marker's white inside is a few pixels)."""
    white = np.all(image == 255, axis=-1)
    labelled, _ = ndimage.label(ndimage.binary_closing(white, np.ones((3, 3))))
    boxes = []
    for sl in ndimage.find_objects(labelled):
        h, w = sl[0].stop - sl[0].start, sl[1].stop - sl[1].start
        if h >= 12 and w >= 24:
            boxes.append(sl)
    return boxes


def _episode(split: str, episode_id: str):
    return next(e for e in load_split(split) if e.episode_id == episode_id)


def _walked(episode) -> np.ndarray:
    start = np.array([episode.start_position[0], episode.start_position[2]])
    return np.array([start, start + [0.6, 0.3], start + [1.2, 1.0]])


@pytest.mark.parametrize(
    ("split", "episode_id"),
    [
        ("val", "hc_val_004_013"),  # its start arrow and path lay on the bathroom label
        ("val100", "hc_val_003_000"),  # the shortest path crossed the hallway label
        ("val", "hc_val_010_000"),
    ],
)
def test_room_labels_are_drawn_over_every_marker_and_path(split: str, episode_id: str) -> None:
    episode = _episode(split, episode_id)
    scene = load_scene(episode.scene_id)
    image = np.asarray(
        maps.render_map(scene, episode=episode, path_xz=_walked(episode), legend=False)
    )
    boxes = _label_boxes(image)
    assert len(boxes) == len(scene.rooms)
    for sl in boxes:
        assert _count(image[sl], _MARKERS) == 0, (sl, "a marker or path is drawn over a label")


@pytest.mark.parametrize("episode_id", ["hc_val_004_013", "hc_val_010_000", "hc_val_017_000"])
def test_room_labels_hide_no_marker_path_or_furniture(episode_id: str) -> None:
    """Drawn with and without labels: what the labels cover shows no marker, path or piece
    of furniture (the homes of val have a free place in every room)."""
    episode = _episode("val", episode_id)
    scene = load_scene(episode.scene_id)
    kwargs = dict(episode=episode, path_xz=_walked(episode), legend=False)
    labelled = np.asarray(maps.render_map(scene, **kwargs))
    bare = np.asarray(maps.render_map(scene, room_labels=False, **kwargs))
    boxes = _label_boxes(labelled)
    assert len(boxes) == len(scene.rooms)
    covered = np.zeros(labelled.shape[:2], bool)
    for sl in boxes:
        assert _count(bare[sl], _MARKERS) == 0, sl
        assert _count(bare[sl], _FURNITURE) == 0, sl
        covered[sl] = True
    # the labels are the only difference
    assert not np.any(np.any(labelled != bare, axis=-1) & ~covered)


def test_a_map_without_an_episode_still_labels_every_room() -> None:
    scene = load_scene("hc_val_003")
    image = np.asarray(maps.render_map(scene, legend=False))
    assert len(_label_boxes(image)) == len(scene.rooms)


# -- the HTML report ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def report_page(tmp_path_factory) -> Path:
    from humanclaw_gym.evaluation.report import write_rollout_report

    out = tmp_path_factory.mktemp("report")
    spec = list_episode_specs("val100")[0]
    config = RunConfig(agent="random", output=str(out), metrics=True, max_steps=3, seed=2)
    assert run_batch([spec], config, progress=False).completed == 1
    return write_rollout_report(rollout_dir(out, spec))


def test_report_headers_may_wrap_between_words_only(report_page: Path) -> None:
    """``overflow-wrap: anywhere`` on every cell broke the headers mid-word ("visible_st" /
    "ate"); headers now wrap at spaces and after an underscore."""
    page = report_page.read_text()
    css = page[page.index("<style>") : page.index("</style>")]
    for selectors, body in re.findall(r"([^{}]+)\{([^}]*)\}", css):
        if "th" in re.split(r"[\s,]+", selectors.strip()) and "overflow-wrap" in body:
            assert "anywhere" not in body and "break-word" not in body, selectors
    assert re.search(r"(^|\s)th\s*\{[^}]*overflow-wrap:\s*normal", css)
    assert "<th>visible_<wbr>state</th>" in page


@pytest.mark.slow
@pytest.mark.parametrize("width", [800, 640])
def test_report_headers_break_only_between_words_in_chromium(report_page: Path, width: int):
    from humanclaw_gym.viewer.screenshot import ChromiumPage, find_chromium

    if find_chromium() is None:
        pytest.skip("chromium is not installed")
    pytest.importorskip("websockets")
    script = r"""(() => {
      const bad = [];
      for (const th of document.querySelectorAll('th')) {
        const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
        let prevTop = null, prevChar = ' ', node;
        while ((node = walker.nextNode())) {
          for (let i = 0; i < node.length; i++) {
            const range = document.createRange();
            range.setStart(node, i); range.setEnd(node, i + 1);
            const rect = range.getClientRects()[0], ch = node.data[i];
            if (!rect || /\s/.test(ch)) { prevChar = ch; continue; }
            if (prevTop !== null && rect.top > prevTop + 2 && !/[\s_\-(/]/.test(prevChar)) {
              bad.push(th.innerText.replace(/\s+/g, ' ') + ' before ' + i);
            }
            prevTop = rect.top; prevChar = ch;
          }
        }
      }
      return bad;
    })()"""
    with ChromiumPage(width, 900) as page:
        page.navigate(report_page.resolve().as_uri())
        page.wait_for("document.readyState === 'complete'")
        assert page.evaluate(script) == []
        assert page.evaluate("document.querySelectorAll('th').length") >= 8


def test_render_map_input_mistakes_exit_2_and_write_nothing(tmp_path: Path, capsys) -> None:
    from humanclaw_gym.cli.scenes_cmd import main as scenes_main

    out = tmp_path / "map.png"
    rc = scenes_main(["render-map", "--scene", "hc_val_003", "--px-per-m", "-1", "--out", str(out)])
    assert rc == 2 and not out.exists()
    assert "error: px_per_m must be > 0" in capsys.readouterr().err
