"""Preprocessing conventions: resize-with-pad, quantile normalisation, prompt formats, request validation."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from rpent.models.pi05.embodiments import get_preset, matrix_to_rot6d, rot6d_to_matrix, delta_to_absolute
from rpent.models.pi05.normalization import NormStats, NormStatsError
from rpent.models.pi05.processor import ObservationError, Pi05Processor, images_to_model, resize_with_pad
from rpent.models.pi05.tiny import tiny_observation
from rpent.models.pi05.tokenizer import PromptTokenizer, TokenizerError, discretize_state


@pytest.fixture(scope="module")
def tok(tiny_ckpts):
    return PromptTokenizer(tiny_ckpts["openpi"] / "tokenizer.model", max_token_len=200, vocab_limit=512)


@pytest.fixture(scope="module")
def stats(tiny_ckpts):
    return NormStats.load(tiny_ckpts["openpi"] / "norm_stats.json")


def test_resize_with_pad_keeps_aspect_and_pads_black_centred():
    img = torch.full((1, 100, 200, 3), 200, dtype=torch.uint8)  # wide image
    out = resize_with_pad(img, 224)
    assert out.shape == (1, 3, 224, 224)
    # 200x100 -> 224x112, padded 56 rows top and bottom
    assert torch.all(out[:, :, :56] == 0) and torch.all(out[:, :, 56 + 112:] == 0)
    assert torch.all(out[:, :, 56:56 + 112] == 200)
    scaled = images_to_model(img[:, None], 224, torch.float32)
    assert scaled.shape == (1, 1, 3, 224, 224)
    assert scaled.min().item() == -1.0 and abs(scaled.max().item() - (200 / 255 * 2 - 1)) < 1e-6


def test_square_resize_is_plain_and_same_size_is_identity():
    rng = np.random.default_rng(0)
    img = torch.from_numpy(rng.integers(0, 256, (2, 256, 256, 3), dtype=np.uint8))
    out = resize_with_pad(img, 224)
    assert out.shape == (2, 3, 224, 224) and out.min() >= 0 and out.max() <= 255
    assert torch.equal(out, out.round())  # uint8 levels, as openpi's PIL resize
    same = resize_with_pad(img[:, :224, :224], 224)
    assert torch.equal(same, img[:, :224, :224].permute(0, 3, 1, 2).float())


def test_quantile_normalisation_round_trip_and_formula():
    ns = NormStats.from_dict({"state": {"q01": [0.0, -2.0], "q99": [1.0, 2.0]}, "actions": {"q01": [-1.0], "q99": [3.0]}})
    np.testing.assert_allclose(ns.state.normalize(np.array([0.5, 2.0, 7.0])), [0.0, 1.0, 7.0], atol=1e-5)  # 3rd dim passes
    y = np.array([[-1.0, 1.0, 0.25]], dtype=np.float32)
    np.testing.assert_allclose(ns.actions.unnormalize(y), [[-1.0, 1.0, 0.25]], atol=1e-5)
    np.testing.assert_allclose(ns.actions.unnormalize(np.array([1.0])), [3.0], atol=1e-5)
    np.testing.assert_allclose(ns.actions.normalize(ns.actions.unnormalize(np.array([0.3]))), [0.3], atol=1e-5)


def test_norm_stats_errors_name_the_problem(tmp_path):
    with pytest.raises(NormStatsError, match="missing 'actions'"):
        NormStats.from_dict({"norm_stats": {"state": {"q01": [0], "q99": [1]}}})
    p = tmp_path / "norm_stats.json"
    with pytest.raises(NormStatsError, match="not found: put openpi's norm_stats.json at the checkpoint root"):
        NormStats.load(p)
    p.write_text(json.dumps({"state": {"q01": [0, 1], "q99": [1]}, "actions": {"q01": [0], "q99": [1]}}))
    with pytest.raises(NormStatsError, match="equal length"):
        NormStats.load(p)


def test_prompt_formats_follow_openpi(tok):
    ids = tok.tokenize("  put_both moka pots\n")
    body = tok.sp.encode("put both moka pots")
    assert ids.tolist() == [tok.bos_id, *body, *tok.sp.encode("\n")]  # BOS + clean(task) + "\n" on its own
    assert tok.sp.id_to_piece(int(ids[-1])) == "\n"
    st = np.array([-1.0, 0.0, 0.999, 1.5])
    np.testing.assert_array_equal(discretize_state(st), [0, 128, 255, 255])
    with_state = tok.tokenize("pick up", st)
    assert tok.sp.decode(with_state[1:].tolist()) == "Task: pick up, State: 0 128 255 255;\nAction: "
    with pytest.raises(TokenizerError, match="max_token_len=200"):
        tok.tokenize("x " * 300)


def test_tokenizer_larger_than_embedding_is_rejected(tiny_ckpts):
    with pytest.raises(TokenizerError, match="wrong tokenizer for this checkpoint"):
        PromptTokenizer(tiny_ckpts["openpi"] / "tokenizer.model", vocab_limit=100)


def _proc(tok, stats, embodiment="libero", discrete=False):
    return Pi05Processor(get_preset(embodiment), stats, tok, discrete)


def test_prepare_validates_requests_with_fixes(tok, stats):
    p = _proc(tok, stats)
    good = tiny_observation("libero", 2)
    req = p.prepare(good, {"seed": 1}, action_horizon=10)
    assert req.images.shape == (2, 2, 256, 256, 3) and req.noise.shape == (2, 10, 32) and len(req.token_ids) == 2
    np.testing.assert_array_equal(req.noise, p.prepare(good, {"seed": 1}, action_horizon=10).noise)
    cases = [
        ({k: v for k, v in good.items() if k != "wrist_images"}, None, "lacks 'wrist_images'"),
        ({**good, "main_images": good["main_images"].astype(np.float32)}, None, "must be uint8"),
        ({**good, "main_images": good["main_images"][0]}, None, "add the batch dim"),
        ({**good, "states": good["states"][:, :7]}, None, r"'states' must be float32 \[B=2, 8\]"),
        ({**good, "task_descriptions": "open"}, None, "list of str"),
        ({**good, "task_descriptions": ["a"]}, None, "batch 2 but 1 task"),
        ({**good, "noise": np.zeros((2, 5, 32), np.float32)}, None, r"'noise' must be float32 \[B=2, 10, 32\]"),
        (good, {"noise_source": "observation"}, "needs observation\\['noise'\\]"),
        (good, {"noise_source": "apxinf"}, "noise_source must be one of"),
        (good, {"temperature": 1.0}, "unknown option"),
    ]
    for obs, opts, msg in cases:
        with pytest.raises(ObservationError, match=msg):
            p.prepare(obs, opts, action_horizon=10)
    # three-view presets need the extra view
    p3 = _proc(tok, NormStats.from_dict({"state": {"q01": [-1] * 14, "q99": [1] * 14}, "actions": {"q01": [-1] * 14, "q99": [1] * 14}}), "yam", True)
    obs3 = tiny_observation("yam", 1)
    assert p3.prepare(obs3, None, 30).images.shape == (1, 3, 256, 256, 3)
    del obs3["extra_view_images"]
    with pytest.raises(ObservationError, match="needs 3 views"):
        p3.prepare(obs3, None, 30)


def test_given_noise_is_used_verbatim(tok, stats):
    p = _proc(tok, stats)
    obs = tiny_observation("libero", 1)
    obs["noise"] = np.full((1, 10, 32), 0.25, np.float32)
    np.testing.assert_array_equal(p.prepare(obs, None, 10).noise, obs["noise"])


def test_postprocess_takes_first_n_exec_and_action_dims_in_env_units(tok, stats):
    p = _proc(tok, stats)
    norm = np.zeros((1, 10, 32), np.float32)
    norm[0, :, :7] = np.linspace(-1, 1, 7)
    norm[0, :, 7:] = 99.0  # padded dims must not leak out
    out = p.postprocess(norm, np.zeros((1, 8), np.float32))
    assert out.shape == (1, 5, 7) and out.dtype == np.float32
    np.testing.assert_allclose(out[0, 0], stats.actions.unnormalize(norm[0, 0, :7]), atol=1e-6)


def test_absolute_transforms_for_bimanual_presets():
    yam = get_preset("yam")
    state = np.arange(14, dtype=np.float32)[None]
    a = np.ones((1, 2, 14), np.float32)
    out = delta_to_absolute(yam, a, state)
    assert out[0, 0, 0] == 1.0 and out[0, 0, 5] == 6.0 and out[0, 0, 6] == 1.0  # gripper stays absolute
    assert out[0, 1, 7] == 8.0 and out[0, 1, 13] == 1.0
    df = get_preset("dual_franka")
    eye6 = matrix_to_rot6d(np.eye(3))
    st = np.concatenate([[0.1, 0.2, 0.3], eye6, [0.5]] * 2)[None].astype(np.float32)
    rz = np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1]], dtype=np.float32)  # 90 deg about z
    act = np.concatenate([[0.01, 0, 0], matrix_to_rot6d(rz), [1.0]] * 2)[None, None].astype(np.float32)
    out = delta_to_absolute(df, act, st)
    np.testing.assert_allclose(out[0, 0, :3], [0.11, 0.2, 0.3], atol=1e-6)
    np.testing.assert_allclose(rot6d_to_matrix(out[0, 0, 3:9]), rz, atol=1e-6)
    assert out[0, 0, 9] == 1.0
