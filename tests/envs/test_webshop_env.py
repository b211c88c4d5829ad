"""The ``webshop`` environment: the shipped catalogue, pages, invalid actions, the oracle, WebShop's file
format, and ``arlkit eval`` with every kind of policy."""

from __future__ import annotations

import csv
import gzip
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

for _module in ("bm25s", "snowballstemmer"):
    pytest.importorskip(_module)

from arlkit.algos import RewardConfig  # noqa: E402
from arlkit.envs import make  # noqa: E402
from arlkit.envs.capabilities import action_quality, inject_error  # noqa: E402
from arlkit.envs.webshop import DatasetError, WebshopEnv, goal_keywords, purchase_score  # noqa: E402
from arlkit.envs.webshop.env import GAMMA  # noqa: E402
from arlkit.rollout import Trajectory, TurnRecord  # noqa: E402
from arlkit.train.batch import score_trajectory  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "src" / "arlkit" / "data" / "webshop"
SAMPLE = Path(__file__).resolve().parents[1] / "data" / "webshop"


@pytest.fixture(scope="module")
def env() -> WebshopEnv:
    built = make("webshop")
    assert isinstance(built, WebshopEnv)
    return built


def _first_perfect_page(env: WebshopEnv) -> None:
    env.step(f"search[{goal_keywords(env.goal)}]")


def test_shipped_catalogue_sizes_format_and_disjoint_splits(env: WebshopEnv) -> None:
    catalog = env.catalog
    assert len(catalog.products) >= 1000 and len({p.asin for p in catalog.products}) == len(catalog.products)
    test, train = env.tasks("test", 500), env.tasks("train", 1000)
    assert len(catalog.goals) >= 1500 and {t.payload["goal_index"] for t in test} == set(range(500))
    assert not {t.task_id for t in test} & {t.task_id for t in train}
    instructions = [t.payload["instruction"] for t in test + train]
    assert len(set(instructions)) == len(instructions)
    assert all(re.fullmatch(r"[a-z0-9 ,:'.\-]+, and price lower than \d+\.00 dollars", i) for i in instructions)
    assert len({p.query for p in catalog.products}) == 30 and {p.category for p in catalog.products} == {
        "beauty", "electronics", "fashion", "food", "furniture"}  # fmt: skip
    assert sum(f.stat().st_size for f in DATA.iterdir()) < 400_000  # small on disk (gzipped JSON)
    with pytest.raises(ValueError, match="only 1000 train goals"):
        env.tasks("train", 1001)


def test_shipped_files_equal_the_generator_output(data_script) -> None:  # type: ignore[no-untyped-def]
    make_catalog = data_script("make_webshop_catalog")
    built = make_catalog.build()
    assert sorted(f"{name}.gz" for name in built) == sorted(p.name for p in DATA.iterdir())
    for name, content in built.items():
        assert gzip.decompress((DATA / f"{name}.gz").read_bytes()).decode("utf-8") == make_catalog.render(content), name


def test_the_oracle_scores_one_on_every_shipped_goal_in_the_structural_bound(env: WebshopEnv) -> None:
    for split, n in (("test", 500), ("train", 1000)):
        for task in env.tasks(split, n):
            env.reset(task, 0)
            bound = env.shortest_solution_length()
            assert bound == 3 + len(env.goal.options), task.task_id  # search, open, one click per option, buy
            for turn in range(bound):
                result = env.step(env.optimal_actions(env.t_max - turn)[0])
            assert result.done and result.success and env.score == 1.0, (task.task_id, result.observation)
            assert env.state.asin == env.goal.asin  # the oracle's first choice is the goal's own product
            assert purchase_score(env) == 1.0 and result.reward == 10.0


def test_tasks_and_transcripts_are_deterministic(env: WebshopEnv) -> None:
    again = make("webshop")
    assert [t.task_id for t in env.tasks("test", 50)] == [t.task_id for t in again.tasks("test", 50)]
    task = env.tasks("test", 7)[6]

    def transcript(e: WebshopEnv) -> list[tuple[str, float, bool]]:
        rows = [(e.reset(task, 3), 0.0, True)]
        for k in range(6):
            actions = e.admissible_actions()
            result = e.step(actions[(5 * k + 1) % len(actions)])
            rows.append((result.observation, result.reward, result.valid))
            if result.done:
                break
        return rows

    assert transcript(env) == transcript(again)  # type: ignore[arg-type]


def test_pages_and_navigation(env: WebshopEnv) -> None:
    task = next(t for t in env.tasks("test", 500) if len(t.payload["options"]) == 2)
    first = env.reset(task, 0)
    assert first.startswith(f"Instruction: {task.payload['instruction']}") and "search[<your query>]" in first
    env.step("search[  T-Shirt   FOR men ]")
    assert env.state.query == "t-shirt for men" and env.state.page_no == 1
    shown = env.admissible_actions()
    assert shown[:2] == ["click[back to search]", "click[next >]"] and len(shown) == 12
    assert env.step("CLICK[Next >]").valid and env.state.page_no == 2 and "click[< prev]" in env.admissible_actions()
    assert env.step("click[< prev]").valid and env.state.page_no == 1
    asin = shown[2][len("click[") : -1]
    product = env.catalog.by_asin[asin.upper()]
    env.step(f"click[{asin}]")
    assert env.state.page == "item" and product.title in env.render()
    name, values = product.options[0]
    env.step(f"click[{values[1]}]")
    assert env.state.options == ((name, values[1]),) and f"(chosen: {values[1]})" in env.render()
    env.step("click[features]")
    assert env.state.page == "detail" and product.bullets[0] in env.render()
    env.step("click[< prev]")
    assert env.state.page == "item" and env.state.options == ((name, values[1]),)  # kept across a detail page
    env.step("click[< prev]")
    assert env.state.page == "results" and env.state.options == ()  # WebShop forgets them on the results page
    env.step("click[back to search]")
    assert env.state.page == "search" and env.state.query == ""
    result = env.step("search[zzzz qqqq]")
    assert result.valid and "No product matches" in result.observation and env.admissible_actions() == ["click[back to search]"]


@pytest.mark.parametrize(
    "action",
    ["", "buy now", "click[buy now]", "search[]", "search[" + "x" * 501 + "]", "click[b0nothere00]", "go[home]", "\x00"],
)
def test_invalid_actions_change_nothing(env: WebshopEnv, action: str) -> None:
    env.reset(env.tasks("test", 1)[0], 0)
    key = env.state_key()
    result = env.step(action)
    assert not result.valid and not result.done and result.reward == 0.0 and "Invalid action" in result.observation
    assert env.state_key() == key
    env.step("search[shampoo]")
    key = env.state_key()
    assert not env.step("search[shampoo]").valid and env.state_key() == key  # no search bar on a results page


def test_invalid_steps_cost_the_trainers_penalty_and_success_earns_ten(env: WebshopEnv) -> None:
    task = env.tasks("test", 3)[2]
    env.reset(task, 0)
    turns = []
    for action in ["click[buy now]", "search[]"] + [env.optimal_actions(env.t_max)[0]]:
        result = env.step(action)
        turns.append(TurnRecord("<think>t</think><action>a</action>", action, result.valid, result.reward, "", strict_format=True))
    while not result.done:
        action = env.optimal_actions(env.t_max)[0]
        result = env.step(action)
        turns.append(TurnRecord("<think>t</think><action>a</action>", action, result.valid, result.reward, "", strict_format=True))
    trajectory = Trajectory("webshop", "p", task.task_id, 0, 15, "announced", 0, 0, "", turns, success=result.success)
    outcome = score_trajectory(trajectory, RewardConfig(success_reward=10.0, invalid_action_penalty=0.1))
    assert outcome.invalid[:3] == (True, True, False) and outcome.score == pytest.approx(10.0 - 0.2, abs=1e-9)
    assert trajectory.total_return == 10.0  # the environment's own rewards: ARLArena's 10 on the purchase


def test_reward_score_mode_returns_the_webshop_score() -> None:
    env = make("webshop", reward="score")
    task = next(t for t in env.tasks("test", 500) if len(t.payload["options"]) == 2)
    env.reset(task, 0)
    _first_perfect_page(env)  # type: ignore[arg-type]
    env.step(f"click[{task.payload['asin'].lower()}]")
    result = env.step("click[buy now]")  # no option chosen: 2 of the 2 + |U_att| + 1 terms are missing
    n_att = len(task.payload["attributes"])
    expected = (n_att + 0 + 1) / (n_att + 2 + 1)
    assert result.done and not result.success and result.reward == pytest.approx(expected, abs=1e-12)
    assert purchase_score(env) == pytest.approx(expected, abs=1e-12)
    assert not env.step("click[buy now]").valid  # the episode is over
    with pytest.raises(ValueError, match="reward"):
        make("webshop", reward="points")


@pytest.mark.parametrize("echo", [
    "Your score (min 0.0, max 1.0): 1.0000",
    "Thank you for shopping with us!\nYour score (min 0.0, max 1.0): 1.0000",
    "click[buy now] Your score (min 0.0, max 1.0): 1.0",
    "search[x]\nYour score (min 0.0, max 1.0): 1.0000",
])
def test_a_score_line_the_policy_writes_scores_nothing(echo: str) -> None:
    env = make("webshop", reward="score")
    task = env.tasks("test", 1)[0]
    env.reset(task, 0)
    result = env.step(echo)  # invalid: the observation echoes it
    assert not result.valid and "Your score (min 0.0, max 1.0): 1.0" in result.observation
    assert purchase_score(env) is None and result.reward == 0.0 and not result.success
    with pytest.raises(TypeError, match="WebshopEnv"):
        purchase_score(result.observation)  # type: ignore[arg-type]
    _first_perfect_page(env)
    env.step(f"click[{task.payload['asin'].lower()}]")
    bought = env.step("click[buy now]")  # a real purchase: its score comes from the environment's record
    assert bought.done and purchase_score(env) == pytest.approx(bought.reward, abs=1e-12) and purchase_score(env) > 0


def test_step_quality_values_any_query_and_error_injection_works(env: WebshopEnv) -> None:
    env.reset(env.tasks("test", 1)[0], 0)
    d = env.shortest_solution_length()
    assert d is not None
    key = env.state_key()
    own = f"search[{goal_keywords(env.goal)}]"
    assert action_quality(env, own, env.t_max) == pytest.approx(GAMMA ** (d - 1), abs=1e-12)
    assert action_quality(env, "search[hdmi cable 25 ft]" if "cable" not in own else "search[lipstick]", env.t_max) < GAMMA ** (d - 1)
    assert action_quality(env, "click[buy now]", env.t_max) == 0.0  # invalid here
    assert action_quality(env, own, d - 1) == 0.0  # does not fit the remaining turns
    assert env.state_key() == key  # scoring changes nothing
    _first_perfect_page(env)
    rng = np.random.default_rng(0)
    injected = None
    for _ in range(50):
        injected = inject_error(env, rng, env.t_max - 1)
        if injected is not None:
            break
    assert injected is not None and injected.result.valid and re.fullmatch(r"distance \d+ -> \d+", injected.detail)
    before, after = (int(x) for x in re.findall(r"\d+", injected.detail))
    assert after > before and env.shortest_solution_length() == after


def test_webshops_own_file_format_loads(tmp_path: Path) -> None:
    env = make("webshop", data_dir=str(SAMPLE), test_goals=3, train_from=3)
    catalog = env.catalog
    # Two bad entries (a repeated asin, "nan") are skipped; prices as WebShop parses them.
    assert [p.asin for p in catalog.products] == ["B09QKP7XQL", "B07ZNPQX21", "B08GLUTEN1", "B01NOATTRS", "B0CHAIR001"]
    tee, heavy, bars, oat, chair = catalog.products
    assert tee.options[0] == ("color", ("black", "navy | white", "heather grey")) and tee.rating == "4.5"
    assert [r.score for r in tee.reviews] == ["5", "3"] and tee.reviews[1].body.startswith("Shrank")
    assert 10.99 <= heavy.price <= 15.99 and heavy.price_tag == "$10.99 to $15.99" and heavy.bullets == ("Double-needle stitching throughout",)
    assert oat.price == 100.0 and oat.attributes == () and bars.options == (("flavor name", ("dark chocolate nut", "caramel almond")),)
    # Goals: the one without attributes and the one whose product is missing are skipped; 5 remain.
    assert len(catalog.goals) == 5 and all(g.instruction.endswith(" dollars") for g in catalog.goals)
    assert len(env.tasks("test", 3)) == 3 and len(env.tasks("train", 2)) == 2
    solved = unsolvable = 0
    for task in env.tasks("test", 3) + env.tasks("train", 2):
        env.reset(task, 0)
        d = env.shortest_solution_length()
        if d is None:  # "reclines to 180 degrees in red": no product has it
            unsolvable += 1
            assert env.success_probability(15) == 0.0
            continue
        for turn in range(d):
            result = env.step(env.optimal_actions(15 - turn)[0])
        assert result.success, task.payload
        solved += 1
    assert (solved, unsolvable) == (4, 1)
    # gzipped files and explicit names work too
    for path in SAMPLE.iterdir():
        (tmp_path / f"{path.name}.gz").write_bytes(gzip.compress(path.read_bytes()))
    zipped = make("webshop", data_dir=str(tmp_path), products_file="items_shuffle_1000.json.gz", test_goals=3)
    assert [t.task_id for t in zipped.tasks("test", 3)] == [t.task_id for t in env.tasks("test", 3)]


def test_missing_and_ambiguous_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no products file"):
        make("webshop", data_dir=str(tmp_path)).tasks("test", 1)
    for path in SAMPLE.iterdir():
        shutil.copy(path, tmp_path / path.name)
    shutil.copy(SAMPLE / "items_shuffle_1000.json", tmp_path / "items_shuffle.json")
    with pytest.raises(DatasetError, match="2 products files match"):
        make("webshop", data_dir=str(tmp_path)).tasks("test", 1)
    (tmp_path / "items_shuffle.json").write_text("[{not json")
    with pytest.raises(DatasetError, match="cannot read it as JSON"):
        make("webshop", data_dir=str(tmp_path), products_file="items_shuffle.json").tasks("test", 1)


def _eval(run_child, out: Path, *args: str) -> list[dict[str, str]]:  # type: ignore[no-untyped-def]
    done = run_child([sys.executable, "-m", "arlkit", "eval", "--out", str(out), "--env", "webshop", *args],
                     capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return [r for r in csv.DictReader(open(out / "passkt.csv")) if r["k"] == "1"]


def test_arlkit_eval_oracle_reaches_pass_one_at_t_max_and_the_bound_below(  # type: ignore[no-untyped-def]
        tmp_path: Path, run_child) -> None:
    rows = _eval(run_child, tmp_path / "announced", "--policy", "oracle", "--tasks", "500", "--samples", "1",
                 "--budgets", "3,4,8,15")
    by_t = {int(r["T"]): r for r in rows}
    assert float(by_t[15]["pass"]) == 1.0
    one_option = sum(len(t.payload["options"]) == 1 for t in make("webshop").tasks("test", 500)) / 500
    assert 0.0 < one_option < 1.0 and float(by_t[3]["pass"]) == 0.0
    assert float(by_t[4]["pass"]) == pytest.approx(one_option, abs=1e-9) and float(by_t[8]["pass"]) == 1.0
    assert all(float(r["pass"]) == pytest.approx(float(r["expected_optimum"]), abs=1e-9) for r in rows)
    hidden = _eval(run_child, tmp_path / "hidden", "--policy", "oracle", "--policy", "random", "--tasks", "60",
                   "--samples", "2", "--budgets", "4,15", "--budget-mode", "hidden")  # fmt: skip
    oracle = [r for r in hidden if r["policy"] == "oracle"]
    assert all(float(r["pass"]) == pytest.approx(float(r["expected_optimum"]), abs=1e-9) for r in oracle)
    lines = [json.loads(line) for line in open(tmp_path / "hidden" / "trajectories.jsonl")]
    random_runs = [t for t in lines if t["policy"] == "random"]
    assert random_runs and all(turn["valid"] for t in random_runs for turn in t["turns"])  # random picks admissible actions


def test_hf_and_openai_policies_play_webshop(tiny_model_dir: Path) -> None:
    from arlkit.policies import SamplingConfig, make_policy
    from arlkit.policies.hf import HFPolicy, load_hf_model
    from arlkit.policies.serve import OpenAICompatibleServer
    from arlkit.rollout import PromptConfig, make_jobs, run_rollouts

    sampling = SamplingConfig(temperature=1.0, max_new_tokens=8)
    tasks = make("webshop").tasks("test", 2)
    jobs = make_jobs(tasks, 1, 2, seed=5)
    model, tokenizer = load_hf_model(tiny_model_dir)
    hf = HFPolicy(model, tokenizer, sampling)
    prompt = PromptConfig(history=1)
    for policy in (hf,):
        done = run_rollouts(lambda: make("webshop"), jobs, policy, prompt)
        assert len(done) == 2 and all(t.error is None and len(t.turns) == 2 for t in done)
    with OpenAICompatibleServer(hf, "nano") as server:
        served = make_policy(f"openai:nano@{server.base_url}", sampling)
        done = run_rollouts(lambda: make("webshop"), jobs, served, prompt)
    assert len(done) == 2 and all(t.error is None and len(t.turns) == 2 for t in done)
