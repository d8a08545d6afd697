"""Training a lerobot policy on an rpent-flywheel export, resuming it, and loading the checkpoint.

Records come from the real ``TrajectoryRecorder`` (64 px images, two tasks), the dataset from the real
export (video, long key-frame interval), training from lerobot's own ACT, optimizer and processors on
the CPU (the ``act-small`` recipe, a few steps), the checkpoint from lerobot's own ``from_pretrained``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from rpent.flywheel import export_records
from tests.conftest import close_parent_watched

def _helpers():
    """The record builders of this folder's conftest (module-scoped fixtures cannot take its fixtures)."""
    import importlib.util
    import sys
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("flywheel_conftest_helpers", Path(__file__).with_name("conftest.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses resolve their module
    spec.loader.exec_module(mod)
    return mod


TASKS = ("pick up the ketchup and place it in the basket", "pick up the milk and place it in the basket")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    record_run = _helpers().record_run
    root = tmp_path_factory.mktemp("flywheel_train")
    for k in range(4):
        record_run(root / "runs" / f"r{k}", [("scripted", 24)], observations="all", success_seq=23, obs_offset=30 * k,
                   image_size=64, task=k % 2, task_language=TASKS[k % 2], suite="libero_object", seed=k)
    report = export_records(root / "runs", root / "ds", rules="v2", video=True, keyframe_interval=240,
                            val_fraction=0.25, split_seed=1, progress=False)
    assert report["dataset"]["image_shape"] == [64, 64, 3]
    return root


@pytest.fixture(scope="module")
def trained(dataset):
    from rpent.training.trainer import TrainArgs, Trainer

    out = dataset / "train"
    args = TrainArgs(dataset=str(dataset / "ds" / "train"), val_dataset=str(dataset / "ds" / "val"), output_dir=str(out),
                     recipe="act-small", steps=3, batch_size=2, save_every=2, log_every=1, device="cpu", progress=False)
    result = Trainer(args, log=lambda m: None).run()
    assert result == {"step": 3, "checkpoint": str(out / "checkpoints" / "000003"), "wall_s": result["wall_s"],
                      "stopped": "done"}
    return out


def test_dataset_loads_every_frame_with_its_episode_end_and_task(dataset):
    import torch

    from rpent.training.data import load_dataset, sample_batch

    data = load_dataset(dataset / "ds" / "train", "cpu")
    info = json.loads((dataset / "ds" / "train" / "meta" / "info.json").read_text())
    assert data.num_frames == info["total_frames"] == 72  # three training episodes of 24 frames
    assert data.images["image"].shape == (72, 64, 64, 3) and data.images["image"].dtype == torch.uint8
    assert set(data.tasks) == set(TASKS)
    assert data.episode_end.tolist() == [24] * 24 + [48] * 24 + [72] * 24
    assert data.info["sha256"] and len(data.info["sha256"]) == 64
    # decoded video frames are the recorded frames up to AV1 loss
    stats = data.image_stats()
    assert all((s["std"] > 0.05).all() for s in stats.values())

    g = torch.Generator().manual_seed(0)
    b = sample_batch(data, 64, 20, g, n_tasks=len(data.tasks), shift_px=4)
    assert b["action"].shape == (64, 20, 7) and b["action_is_pad"].shape == (64, 20)
    assert b["observation.images.image"].shape == (64, 3, 64, 64)
    assert 0.0 <= float(b["observation.images.image"].min()) and float(b["observation.images.image"].max()) <= 1.0
    assert b["observation.environment_state"].sum(1).tolist() == [1.0] * 64
    # padding: rows past the episode end repeat its last action and are flagged
    for row in range(64):
        pad = b["action_is_pad"][row]
        n_real = int((~pad).sum())
        assert 1 <= n_real <= 20
        if n_real < 20:
            assert torch.equal(b["action"][row, n_real:], b["action"][row, n_real - 1].expand(20 - n_real, 7))


def test_training_writes_a_lerobot_checkpoint_and_resumes(trained, dataset):
    from rpent.training.trainer import TrainArgs, Trainer

    ck = trained / "checkpoints"
    assert (ck / "last").resolve().name == "000003"
    assert sorted(p.name for p in ck.iterdir() if not p.name.startswith(".")) == ["000002", "000003", "last"]
    pre = ck / "last" / "pretrained_model"
    for f in ("config.json", "model.safetensors", "policy_preprocessor.json", "policy_postprocessor.json",
              "rpent_policy.json", "loss.png"):
        assert (pre / f).is_file(), f
    spec = json.loads((pre / "rpent_policy.json").read_text())
    assert spec["image_size"] == 64 and spec["task_conditioning"]["kind"] == "one_hot"
    assert spec["dataset"]["sha256"] == json.loads((trained / "train_config.json").read_text())["dataset"]["sha256"]
    metrics = [json.loads(x) for x in (trained / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "loss" in m] == [1, 2, 3]
    assert [m["step"] for m in metrics if "val_loss" in m] == [2, 3]
    assert (trained / "loss.png").read_bytes()[:4] == b"\x89PNG"

    # resume from the last checkpoint: the step count, schedule and metrics continue
    args = TrainArgs(dataset=str(dataset / "ds" / "train"), output_dir=str(trained), recipe="act-small", steps=4,
                     batch_size=2, save_every=2, log_every=1, device="cpu", resume=True, progress=False)
    t = Trainer(args, log=lambda m: None)
    assert t.step == 3 and t.scheduler.last_epoch == 3
    assert t.optimizer.state_dict()["state"], "optimizer moments were restored"
    assert t.run()["step"] == 4
    metrics = [json.loads(x) for x in (trained / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "loss" in m] == [1, 2, 3, 4]

    with pytest.raises(Exception, match="not empty"):
        Trainer(TrainArgs(dataset=str(dataset / "ds" / "train"), output_dir=str(trained), recipe="act-small",
                          device="cpu", progress=False), log=lambda m: None)


def test_policy_predicts_chunks_and_refuses_unknown_tasks(trained, tmp_path):
    from rpent.models.lerobot.policy import LerobotPolicy, ObservationError
    from rpent.training.trainer import export_compact

    p = LerobotPolicy(trained, device="cpu")
    meta = p.metadata()
    assert meta["policy"] == "lerobot:act" and meta["n_exec"] == 10 and meta["image_size"] == 64
    assert len(meta["checkpoint"]["model_sha256"]) == 64 and meta["dataset"]["sha256"]
    rng = np.random.default_rng(0)
    obs = {"main_images": rng.integers(0, 256, (3, 64, 64, 3), dtype=np.uint8),
           "wrist_images": rng.integers(0, 256, (3, 64, 64, 3), dtype=np.uint8),
           "states": rng.normal(size=(3, 8)).astype(np.float32), "task_descriptions": [p.tasks[0]] * 3}
    a = p.predict(obs)
    assert a.shape == (3, 10, 7) and a.dtype == np.float32 and np.isfinite(a).all()
    # batched rows equal single-row predictions (eval mode: no dropout, no VAE sampling)
    one = p.predict({k: (v[:1] if k != "task_descriptions" else v[:1]) for k, v in obs.items()})
    np.testing.assert_allclose(one[0], a[0], atol=1e-4)
    # 128 px renders are resized to the checkpoint's 64 px
    big = {**obs, "main_images": np.repeat(np.repeat(obs["main_images"], 2, 1), 2, 2),
           "wrist_images": np.repeat(np.repeat(obs["wrist_images"], 2, 1), 2, 2)}
    assert p.predict(big).shape == (3, 10, 7)
    with pytest.raises(ObservationError, match="not one this policy was trained on"):
        p.predict({**obs, "task_descriptions": ["open the microwave"] * 3})
    with pytest.raises(ObservationError, match="states must be"):
        p.predict({**obs, "states": np.zeros((3, 7), np.float32)})

    compact = export_compact(trained / "checkpoints" / "last" / "pretrained_model", tmp_path / "fp16")
    assert (compact / "model.safetensors").stat().st_size < 0.6 * (trained / "checkpoints" / "last" / "pretrained_model"
                                                                   / "model.safetensors").stat().st_size
    np.testing.assert_allclose(LerobotPolicy(compact, device="cpu").predict(obs), a, atol=5e-2)


def test_policy_server_answers_predict_over_rpc_and_batches_clients(trained):
    import subprocess
    import sys
    import threading

    from rpent.rpc import RemoteError, RpcClient
    from rpent.rpc.protocol import READY_PREFIX

    proc = subprocess.Popen(
        [sys.executable, "-m", "rpent.robots.components.lerobot_policy_server", "--checkpoint", str(trained),
         "--device", "cpu", "--n-exec", "5", "--transport", "socket", "--port", "0", "--parent-watch"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith(READY_PREFIX), (line, proc.stderr.read() if proc.poll() is not None else "")
        endpoint = line[len(READY_PREFIX):].strip()
        with RpcClient(endpoint, timeout=60) as client:
            meta = client.call("vla.metadata")
            assert meta["n_exec"] == 5 and meta["num_views"] == 2 and meta["image_size"] == 64
            assert meta["checkpoint"]["model_sha256"] and meta["dataset"]["sha256"]
            task = meta["tasks"][0]
            rng = np.random.default_rng(1)

            def obs(b):
                return {"main_images": rng.integers(0, 256, (b, 64, 64, 3), dtype=np.uint8),
                        "wrist_images": rng.integers(0, 256, (b, 64, 64, 3), dtype=np.uint8),
                        "states": rng.normal(size=(b, 8)).astype(np.float32), "task_descriptions": [task] * b}

            out = np.asarray(client.call("vla.predict", obs(2)))
            assert out.shape == (2, 5, 7) and out.dtype == np.float32
            with pytest.raises(RemoteError, match="not one this policy was trained on"):
                client.call("vla.predict", {**obs(1), "task_descriptions": ["stack the blocks"]})
            # four concurrent clients: every one gets its own rows back
            shapes, errors = [], []

            def one(b):
                try:
                    with RpcClient(endpoint, timeout=120) as c:
                        shapes.append(np.asarray(c.call("vla.predict", obs(b))).shape)
                except Exception as e:  # noqa: BLE001 - collected and asserted below
                    errors.append(e)

            threads = [threading.Thread(target=one, args=(b,)) for b in (1, 2, 3, 1)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors and sorted(shapes) == [(1, 5, 7), (1, 5, 7), (2, 5, 7), (3, 5, 7)]
            stats = client.call("vla.stats")
            assert stats["batches_run"] >= 2
    finally:
        close_parent_watched(proc, timeout=20)


def test_export_keeps_one_image_size_per_dataset(tmp_path, record_run):
    for k, size in enumerate((64, 64, 96)):
        record_run(tmp_path / "runs" / f"r{k}", [("scripted", 5)], observations="all", success_seq=4, obs_offset=10 * k,
                   image_size=size, seed=k)
    report = export_records(tmp_path / "runs", tmp_path / "ds", rules="v2", progress=False)
    assert report["dataset"]["image_shape"] == [64, 64, 3] and report["counts"]["runs_exported"] == 2
    assert report["exclusion_counts"] == {"image_size_mismatch": 1}
    assert "(96, 96, 3)" in report["exclusions"][0]["detail"]
    info = json.loads((tmp_path / "ds" / "train" / "meta" / "info.json").read_text())
    assert info["features"]["wrist_image"]["shape"] == [64, 64, 3]
    assert "single `rpent` runs" in (tmp_path / "ds" / "train" / "README.md").read_text()


def test_fit_steps_to_budget_ends_the_schedule_with_the_budget(dataset, monkeypatch):
    from rpent.training import trainer as tr

    monkeypatch.setattr(tr, "PROBE_STEPS", 2)
    out = dataset / "fit"
    args = tr.TrainArgs(dataset=str(dataset / "ds" / "train"), output_dir=str(out), recipe="act-small", steps=100000,
                        batch_size=2, save_every=100000, log_every=1, device="cpu", time_budget_s=20.0,
                        fit_steps_to_budget=True, progress=False)
    t = tr.Trainer(args, log=lambda m: None)
    result = t.run()
    cfg = json.loads((out / "train_config.json").read_text())
    assert 3 <= cfg["fitted_steps"] < 100000 and cfg["probe_steps_per_s"] > 0
    assert t.args.steps == cfg["fitted_steps"] and t.scheduler.last_epoch == result["step"]
    state = json.loads((out / "checkpoints" / "last" / "training_state" / "training_state.json").read_text())
    assert state["total_steps"] == cfg["fitted_steps"]


def test_diffusion_policy_trains_and_serves_through_the_same_code(dataset):
    from rpent.models.lerobot.policy import LerobotPolicy
    from rpent.training.trainer import TrainArgs, Trainer

    out = dataset / "diffusion"
    args = TrainArgs(dataset=str(dataset / "ds" / "train"), output_dir=str(out), recipe="diffusion", steps=1,
                     batch_size=2, save_every=1, log_every=1, device="cpu", progress=False)
    assert Trainer(args, log=lambda m: None).run()["step"] == 1
    p = LerobotPolicy(out, device="cpu")
    assert p.metadata()["policy"] == "lerobot:diffusion" and p.n_exec == 8
    obs = {"main_images": np.zeros((2, 64, 64, 3), np.uint8), "wrist_images": np.zeros((2, 64, 64, 3), np.uint8),
           "states": np.zeros((2, 8), np.float32), "task_descriptions": [p.tasks[0], p.tasks[-1]]}
    a = p.predict(obs)
    assert a.shape == (2, 8, 7) and np.isfinite(a).all()
