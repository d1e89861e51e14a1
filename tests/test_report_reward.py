"""The HTML rollout report and the shaped-reward wrapper."""

from __future__ import annotations

import gymnasium as gym
import pytest

import humanclaw_gym  # noqa: F401
from humanclaw_gym import SkillCall
from humanclaw_gym.envs import ENV_ID
from humanclaw_gym.evaluation.batch import RunConfig, list_episode_specs, rollout_dir, run_batch
from humanclaw_gym.wrappers import GeodesicProgressReward


def test_report_html_from_a_rollout(tmp_path):
    from humanclaw_gym.cli import main

    spec = list_episode_specs("val100")[0]
    config = RunConfig(agent="random", output=str(tmp_path), metrics=True, max_steps=3, seed=2)
    assert run_batch([spec], config, progress=False).completed == 1
    d = rollout_dir(tmp_path, spec)
    assert (d / "final_ego.png").is_file()
    assert main(["report", "--rollout-dir", str(d)]) == 0
    page = (d / "report.html").read_text()
    assert page.count("data:image/png;base64,") >= 3  # map + at least one ego and exo view
    assert "third person" in page
    assert "nav_success_20cm" in page and spec.episode_id in page
    # every decision appears as a row
    assert page.count("<td class='n'>") >= 1
    # metrics are rounded for reading; not applicable ones say so
    import re

    metrics = re.findall(r"<tr><th>(\w+)</th><td class='num'>([^<]*)</td></tr>", page)
    assert len(metrics) >= 8
    for name, text in metrics:
        assert not re.search(r"\d\.\d{4,}", text), (name, text)
        assert text != "None", name
    values = dict(metrics)
    assert values["nav_success_20cm"] in ("yes", "no")
    from humanclaw_gym.episodes import load_split

    episode = next(e for e in load_split("val100") if e.episode_id == spec.episode_id)
    if not episode.interact:  # a find episode: no interaction to score
        assert values["interact_success"] == "n/a"


def test_map_draws_and_labels_both_paths():
    import numpy as np

    from humanclaw_gym.episodes import load_scene, load_split
    from humanclaw_gym.scenes import maps

    episode = load_split("val100")[0]
    scene = load_scene(episode.scene_id)
    start = np.array([episode.start_position[0], episode.start_position[2]])
    walked = np.array([start, start + [0.5, 0.2], start + [0.9, 0.9]])

    def pixels(image, color):
        arr = np.asarray(image)
        return int(np.count_nonzero(np.all(arr == np.array(color, dtype=np.uint8), axis=-1)))

    both = maps.render_map(scene, episode=episode, path_xz=walked)
    only_agent = maps.render_map(scene, episode=episode, path_xz=walked, shortest_path=False)
    only_route = maps.render_map(scene, episode=episode)
    # the agent's path is orange, the shortest path blue: both drawn when both are known
    assert pixels(both, maps._AGENT_PATH_COLOR) > 50 and pixels(both, maps._PATH_COLOR) > 50
    assert pixels(only_route, maps._AGENT_PATH_COLOR) == 0
    assert pixels(only_agent, maps._PATH_COLOR) < pixels(both, maps._PATH_COLOR)


def test_map_legend_symbols_are_distinct():
    """Every legend row has its own symbol (style and colour); the episode's markers are
    arrows, rings, outlines or lines, never the filled shapes objects are drawn with, so a
    seat approach pose cannot be taken for a cup."""
    from humanclaw_gym.scenes import maps

    rows = maps.legend_rows(
        list(maps.CATEGORY_COLORS),
        episode=True,
        approach_pose=True,
        approach_points=True,
        shortest_path=True,
        agent_path=True,
    )
    symbols = [(style, color) for _, color, style in rows]
    assert len(set(symbols)) == len(symbols)
    overlays = rows[: len(rows) - len(maps.CATEGORY_COLORS)]
    assert {style for _, _, style in overlays} <= {"outline", "arrow", "ring", "line"}
    assert any(label.startswith("seat approach pose") for label, _, _ in overlays)


def test_report_refuses_missing_bundle(tmp_path):
    from humanclaw_gym.cli import main

    assert main(["report", "--rollout-dir", str(tmp_path)]) == 2


def test_shaped_reward_needs_privileged_env():
    env = gym.make(ENV_ID, split="val100", max_steps=2)
    try:
        with pytest.raises(PermissionError):
            GeodesicProgressReward(env)
    finally:
        env.close()


def test_shaped_reward_follows_geodesic_progress():
    from humanclaw_agents.oracle import OraclePolicy

    env = GeodesicProgressReward(gym.make(ENV_ID, split="val100", privileged=True, max_steps=6))
    oracle = OraclePolicy()
    oracle.attach_env(env)
    try:
        obs, info = env.reset(seed=0)
        oracle.reset(info)
        total_progress = 0.0
        for _ in range(6):
            decision = oracle.act(obs, info)
            if decision.action.is_stop:
                break
            obs, reward, term, trunc, info = env.step(decision)
            terms = info["shaped_reward_terms"]
            assert reward == pytest.approx(sum(terms.values()))
            assert terms["step"] == pytest.approx(-0.01)
            total_progress += terms["progress"]
            if term or trunc:
                break
        assert total_progress > 0.3, (
            "following the shortest path should reduce the geodesic distance"
        )
        # a Stop far from the target is penalised
        env.reset(seed=0)
        _, reward, term, _, info = env.step(SkillCall.stop())
        assert term and info["shaped_reward_terms"]["stop"] == pytest.approx(-1.0)
    finally:
        env.close()


@pytest.mark.slow
def test_report_page_in_headless_chromium_fits_800_px(tmp_path):
    """The report at an 800 px wide window: nothing sticks out, numbers are short."""
    from humanclaw_gym.evaluation.report import write_rollout_report
    from humanclaw_gym.viewer.screenshot import ChromiumPage, find_chromium

    if find_chromium() is None:
        pytest.skip("chromium is not installed")
    pytest.importorskip("websockets")
    spec = list_episode_specs("val100")[0]
    config = RunConfig(agent="oracle", output=str(tmp_path), metrics=True, max_steps=4)
    assert run_batch([spec], config, progress=False).completed == 1
    page_path = write_rollout_report(rollout_dir(tmp_path, spec))
    with ChromiumPage(800, 900) as page:
        page.navigate(page_path.resolve().as_uri())
        page.wait_for("document.readyState === 'complete' && document.images.length >= 3")
        page.wait_for("[...document.images].every((i) => i.complete && i.naturalWidth > 0)")
        width = page.evaluate("document.documentElement.clientWidth")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        rights = page.evaluate(
            "[...document.querySelectorAll('table, img')].map((e) => e.getBoundingClientRect().right)"
        )
        assert rights and max(rights) <= width
        cells = page.evaluate("[...document.querySelectorAll('td.num')].map((e) => e.innerText)")
        assert cells and all(len(c) <= 8 for c in cells), cells
        page.screenshot(tmp_path / "report.png")
