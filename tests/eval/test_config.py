"""Config loading, overrides and the seed's validations (no simulator)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO
from rpent.eval.config import (
    DEFAULT_CONFIG_NAME,
    apply_overrides,
    load_eval_config,
    resolved,
    shipped_config_names,
)
from rpent.eval.errors import CheckpointError, EvalConfigError
from rpent.eval.validation import build_settings, resolve_num_workers

ENDPOINT = "policy.endpoint=http://127.0.0.1:9"  # endpoint backend: no checkpoint needed to validate


def settings(*overrides: str, name: str = DEFAULT_CONFIG_NAME, cpu_count: int = 2):
    return build_settings(load_eval_config(name, list(overrides)), cpu_count=cpu_count)


def test_default_config_matches_the_seed_table(tmp_path, monkeypatch):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    for f in ("config.json", "model.safetensors", "norm_stats.json"):
        (ckpt / f).write_text("{}")
    monkeypatch.delenv("PI05_CHECKPOINT_PATH", raising=False)
    monkeypatch.setenv("APXINF_PI05_MODEL_DIR", str(ckpt))
    s = build_settings(load_eval_config(), cpu_count=16)
    assert s.config_name == "libero_10_pi05_eval"
    e, m = s.env, s.model
    assert (e.suite, e.rollout_epoch, e.total_num_envs, e.max_episode_steps) == ("libero_10", 10, 10, 520)
    assert e.expected_trajectories == 100 and e.num_workers == 10  # auto: largest divisor of 10 <= 16 CPUs
    assert (m.num_action_chunks, m.action_dim, m.num_images_in_input, m.num_steps, m.action_horizon) == (5, 7, 2, 5, 10)
    assert (m.noise_method, m.precision, m.num_flow_steps, m.noise_source) == ("flow_sde", "bf16", 5, "apxinf")
    assert m.config_name == "pi05_libero" and m.model_path == str(ckpt)
    assert s.policy.backend == "pi05" and s.logger_backends == ("tensorboard",)


def test_model_path_comes_from_either_variable_and_unset_names_both(tmp_path, monkeypatch):
    monkeypatch.delenv("APXINF_PI05_MODEL_DIR", raising=False)
    monkeypatch.delenv("PI05_CHECKPOINT_PATH", raising=False)
    cfg = load_eval_config().cfg
    with pytest.raises(EvalConfigError, match="APXINF_PI05_MODEL_DIR or PI05_CHECKPOINT_PATH is not set"):
        resolved(cfg, "rollout.model.model_path")
    with pytest.raises(EvalConfigError, match="rollout.model.model_path"):
        build_settings(load_eval_config())
    monkeypatch.setenv("PI05_CHECKPOINT_PATH", "/b")
    assert resolved(cfg, "rollout.model.model_path") == "/b"
    monkeypatch.setenv("APXINF_PI05_MODEL_DIR", "/a")
    assert resolved(cfg, "rollout.model.model_path") == "/a"  # the seed's variable wins
    # the endpoint backend never reads the model path
    monkeypatch.delenv("APXINF_PI05_MODEL_DIR")
    monkeypatch.delenv("PI05_CHECKPOINT_PATH")
    assert settings(ENDPOINT).model.model_path is None
    # an oc.env reference names its variable too
    plain = load_eval_config(overrides=["rollout.model.model_path=${oc.env:RPENT_TEST_UNSET_VAR}"]).cfg
    with pytest.raises(EvalConfigError, match="RPENT_TEST_UNSET_VAR is not set"):
        resolved(plain, "rollout.model.model_path")


@pytest.mark.parametrize("name", shipped_config_names())
def test_every_shipped_config_validates(name):
    s = settings(ENDPOINT, name=name)
    assert s.env.suite in name and s.env.expected_trajectories == s.env.total_num_envs * 10
    assert s.env.libero_type == ("pro" if any(name.startswith(f"{b}_{v}_") for b in
                                              ("libero_10", "libero_spatial", "libero_object", "libero_goal")
                                              for v in ("task", "swap", "lan", "object")) else "standard")


def test_shipped_set_covers_standard_and_pro_suites():
    names = set(shipped_config_names())
    for base in ("libero_spatial", "libero_object", "libero_goal", "libero_10"):
        assert f"{base}_pi05_eval" in names
        for variant in ("task", "swap", "lan", "object"):
            assert f"{base}_{variant}_pi05_eval" in names
    assert "libero_90_pi05_eval" in names


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["runner.only_eval=false"], "runner.only_eval must be true: rpent-eval is evaluation-only"),
        (["runner.enable_decoupled_mode=true"], "decoupled rollout is not supported"),
        (["rollout.model.openpi.config_name=pi0_libero"], "only PI0.5 OpenPI configs are supported"),
        (["rollout.model.apxinf.num_flow_steps=10"], "num_flow_steps must match OpenPI num_steps"),
        (["rollout.model.openpi.num_steps=10"], None),  # the interpolation keeps them in step
        (["rollout.model.apxinf.action_horizon=4"], "action_horizon must be at least num_action_chunks"),
        (["rollout.model.openpi.noise_method=ddim"], "unsupported noise_method 'ddim'.*flow_ode or flow_sde"),
        (["rollout.model.apxinf.noise_source=numpy"], "invalid noise_source 'numpy'.*apxinf, torch or observation"),
        (["env.eval.total_num_envs=15", "env.num_workers=2"],
         r"total_num_envs \(15\) must be divisible by the number of environment processes"),
        (["env.eval.auto_reset=true"], "auto_reset=true is not supported.*executing action in terminated episode"),
        (["env.eval.max_steps_per_rollout_epoch=100"], "must equal env.eval.max_episode_steps"),
        (["env.eval.rollout_epoch=0"], "env.eval.rollout_epoch must be >= 1"),
        (["env.eval.task_ids=[]"], "env.eval.task_ids must be null or a non-empty list"),
        (["rollout.model.action_dim=8"], "action_dim must be 7 for LIBERO"),
        (["policy.backend=apxinf"], "policy.endpoint is set but policy.backend=apxinf"),
        (["policy.endpoint=ftp://x:1"], "policy.endpoint: invalid RPC endpoint .*unknown protocol"),
        (["runner.logger.logger_backends=[wandb]"], "only 'tensorboard' is supported"),
    ],
)
def test_seed_constraints_are_enforced_with_their_messages(overrides, message):
    if message is None:
        s = settings(ENDPOINT, *overrides)
        assert s.model.num_steps == s.model.num_flow_steps == 10
        return
    with pytest.raises(EvalConfigError, match=message):
        settings(ENDPOINT, *overrides)


def test_checkpoint_directory_checks(tmp_path, monkeypatch):
    monkeypatch.setenv("APXINF_PI05_MODEL_DIR", str(tmp_path / "missing"))
    with pytest.raises(CheckpointError, match="does not exist"):
        settings()
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    (ckpt / "model.safetensors").write_bytes(b"")
    monkeypatch.setenv("APXINF_PI05_MODEL_DIR", str(ckpt))
    with pytest.raises(CheckpointError, match="missing norm_stats.json.*checkpoint root"):
        settings()
    (ckpt / "norm_stats.json").write_text("{}")
    assert settings().model.model_path == str(ckpt)


def test_overrides_are_strict_like_hydra():
    cfg = load_eval_config().cfg
    with pytest.raises(EvalConfigError, match="did you mean env.eval.total_num_envs"):
        apply_overrides(cfg, ["env.eval.total_num_env=3"])
    with pytest.raises(EvalConfigError, match="malformed override"):
        apply_overrides(cfg, ["env.eval.total_num_envs"])
    with pytest.raises(EvalConfigError, match="already exists"):
        apply_overrides(cfg, ["+env.eval.total_num_envs=3"])
    apply_overrides(cfg, ["+env.eval.extra_key=1", "++env.eval.rollout_epoch=3", "env.eval.task_ids=[1,2]"])
    assert resolved(cfg, "env.eval.extra_key") == 1 and resolved(cfg, "env.eval.rollout_epoch") == 3
    assert resolved(cfg, "env.eval.task_ids") == [1, 2]
    with pytest.raises(EvalConfigError, match="log directory is generated"):
        load_eval_config(overrides=["+runner.logger.log_path=../results"])


def test_yaml_files_with_defaults_and_bad_names(tmp_path):
    (tmp_path / "base.yaml").write_text("defaults: [libero_goal_pi05_eval]\nenv:\n  eval:\n    rollout_epoch: 2\n")
    (tmp_path / "mine.yaml").write_text("defaults: [base]\nenv:\n  eval:\n    total_num_envs: 4\n")
    loaded = load_eval_config(tmp_path / "mine.yaml", [ENDPOINT])
    s = build_settings(loaded, cpu_count=2)
    assert loaded.name == "mine" and s.env.suite == "libero_goal" and s.env.rollout_epoch == 2
    assert s.env.total_num_envs == 4 and s.env.num_workers == 2
    (tmp_path / "loop.yaml").write_text("defaults: [loop]\n")
    with pytest.raises(EvalConfigError, match="cycle"):
        load_eval_config(tmp_path / "loop.yaml")
    with pytest.raises(EvalConfigError, match="shipped configs: .*libero_10_pi05_eval"):
        load_eval_config("no_such_config")


def test_auto_workers_is_the_largest_divisor_within_the_cpu_count():
    assert resolve_num_workers("auto", 10, cpu_count=2) == 2
    assert resolve_num_workers("auto", 10, cpu_count=4) == 2
    assert resolve_num_workers("auto", 80, cpu_count=16) == 16
    assert resolve_num_workers("auto", 7, cpu_count=2) == 1
    assert resolve_num_workers(5, 10) == 5


def test_cli_show_plan_and_config_errors_in_a_real_process():
    run = subprocess.run(
        [sys.executable, "-m", "rpent.cli.eval", "--config", "libero_10_pi05_eval", "--show-plan", ENDPOINT,
         "env.eval.total_num_envs=20", "env.num_workers=4", "env.eval.rollout_epoch=2"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "20 envs x 2 epochs = 40 trajectories over 4 worker(s) (5 envs each)" in run.stdout
    assert "task  9 (4 eps): reset states 0-3" in run.stdout
    assert "\n1\t19\t3\t9\t3\t39\t" in run.stdout  # epoch 1, env 19 (worker 3): task 9, reset state 3
    bad = subprocess.run(
        [sys.executable, "-m", "rpent.cli.eval", ENDPOINT, "env.eval.total_num_envs=10", "env.num_workers=8"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )
    assert bad.returncode == 2
    assert "total_num_envs (10) must be divisible by the number of environment processes" in bad.stderr
    listing = subprocess.run([sys.executable, "-m", "rpent.cli.eval", "--list-configs"], capture_output=True,
                             text=True, cwd=REPO, timeout=120)
    assert listing.returncode == 0 and "libero_10_swap_pi05_eval" in listing.stdout.split()


def test_a_yaml_syntax_error_is_one_line_naming_the_place(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("suites: [libero_object\ntasks: 0-\n  arms: {\n")
    with pytest.raises(EvalConfigError, match=r"is not valid YAML \(line 2, column 6\)"):
        load_eval_config(str(bad))
    run = subprocess.run([sys.executable, "-m", "rpent.cli.eval", "--config", str(bad)], capture_output=True,
                         text=True, cwd=REPO, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == [
        f"rpent-eval: config error: config {bad} is not valid YAML (line 2, column 6): "
        "did not find expected ',' or ']'; fix the file"]


def test_pipeline_stage_num_defaults_to_two_and_is_bounded_by_the_workers():
    assert settings(ENDPOINT, "env.eval.total_num_envs=4", "env.num_workers=2").env.pipeline_stage_num == 2
    s = settings(ENDPOINT, "env.eval.total_num_envs=4", "env.num_workers=2", "rollout.pipeline_stage_num=1")
    assert s.env.pipeline_stage_num == 1
    # more stages than workers: one worker per stage
    assert settings(ENDPOINT, "env.eval.total_num_envs=4", "env.num_workers=2",
                    "rollout.pipeline_stage_num=3").env.pipeline_stage_num == 2
    assert settings(ENDPOINT, "env.eval.total_num_envs=1", "env.num_workers=1").env.pipeline_stage_num == 1
    with pytest.raises(EvalConfigError, match="rollout.pipeline_stage_num must be >= 1"):
        settings(ENDPOINT, "rollout.pipeline_stage_num=0")
    # a config without the key (written for older versions): every env in one call
    plain = load_eval_config(DEFAULT_CONFIG_NAME, [ENDPOINT, "env.eval.total_num_envs=4", "env.num_workers=2"])
    del plain.cfg.rollout["pipeline_stage_num"]
    assert build_settings(plain, cpu_count=2).env.pipeline_stage_num == 1


def test_lerobot_config_holds_out_init_states_and_needs_a_checkpoint(tmp_path):
    s = settings(ENDPOINT, name="libero_object_lerobot_eval")
    assert s.policy.backend == "endpoint"  # an endpoint serves the lerobot checkpoint
    assert s.env.init_state_ids == tuple(range(40, 50)) and s.env.policy_image_size == 0
    assert s.env.ignore_terminations is False and s.model.num_action_chunks == 10
    with pytest.raises(EvalConfigError, match="policy.backend=lerobot needs policy.checkpoint"):
        settings(name="libero_object_lerobot_eval")
    with pytest.raises(CheckpointError, match="holds no lerobot checkpoint"):
        settings(f"policy.checkpoint={tmp_path}", name="libero_object_lerobot_eval")
    with pytest.raises(EvalConfigError, match="init_state_ids"):
        settings(ENDPOINT, "env.eval.init_state_ids=abc", name="libero_object_lerobot_eval")
    with pytest.raises(EvalConfigError, match="policy_image_size"):
        settings(ENDPOINT, "env.eval.policy_image_size=8", name="libero_object_lerobot_eval")


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["env.eval.reward_coef=abc"], r"env.eval.reward_coef must be a finite number, got 'abc'"),
        (["env.eval.video_fps=abc"], r"env.eval.video_fps must be a finite number, got 'abc'"),
        (["env.eval.video_fps=nan"], r"env.eval.video_fps must be a finite number, got '?nan'?"),
        (["env.eval.video_fps=0"], r"env.eval.video_fps must be > 0, got 0"),
        (["policy.timeout_s=inf"], r"policy.timeout_s must be a finite number, got '?inf'?"),
        (["policy.timeout_s=-1"], r"policy.timeout_s must be > 0, got -1"),
        (["env.eval.total_num_envs=100000000"], r"100000000 x 10 trajectories is more than one evaluation plans"),
        (["env.eval.rollout_epoch=1000000000"], r"10 x 1000000000 trajectories is more than one evaluation plans"),
    ],
)
def test_numbers_that_are_not_numbers_or_absurd_are_one_line_errors(overrides, message):
    with pytest.raises(EvalConfigError, match=message):
        settings(ENDPOINT, *overrides)


def test_an_unknown_policy_device_is_refused_before_loading_a_model(tmp_path, monkeypatch):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    for name in ("config.json", "model.safetensors", "norm_stats.json"):
        (ckpt / name).write_text("{}")
    monkeypatch.setenv("APXINF_PI05_MODEL_DIR", str(ckpt))
    with pytest.raises(EvalConfigError, match="policy.device must be auto, cpu, cuda or cuda:N, got 'quantum'"):
        settings("policy.device=quantum")
    assert settings("policy.device=cpu").policy.device == "cpu"


def test_a_config_file_that_is_not_utf8_or_a_bad_number_is_one_line_without_traceback(tmp_path):
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00runner: 1\n")
    run = subprocess.run([sys.executable, "-m", "rpent.cli.eval", "--config", str(binary)], capture_output=True,
                         text=True, cwd=REPO, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.strip().splitlines() == [
        f"rpent-eval: config error: config {binary} is not UTF-8 text (invalid start byte at byte 0); "
        "save it as UTF-8 YAML"]
    run = subprocess.run([sys.executable, "-m", "rpent.cli.eval", "--show-plan", ENDPOINT, "env.eval.reward_coef=abc"],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert "env.eval.reward_coef must be a finite number, got 'abc'" in run.stderr
