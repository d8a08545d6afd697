"""Task memory in a real run: the api planner (official Anthropic SDK) talks to the local
provider endpoint (``python -m rpent.planners.provider_endpoint --record``) while ``rpent``
runs a real env server; the recorded request's system prompt holds MEMORY.md and the relevant
leaves, and the transcript lists the files read. A tampered corpus is refused before anything
starts, naming the file; code mode ignores memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rpent.memory.corpus import build_index

TASK = ["--suite", "libero_object", "--task", "0", "--seed", "0", "--no-video"]
LEAF = ("---\nscope: global\nkind: strategy\ntitle: Basket drops\napplies_when: the target is a basket\n"
        "confidence: probable\nevidence:\n  cells: [object_t0_s0, object_t1_s0]\n  attempts: 2\n---\n"
        "Release 3 cm above the basket rim; MEMORY-MARKER-7731.\n")


def _corpus(root: Path) -> Path:
    corpus = root / "libero"
    (corpus / "global").mkdir(parents=True)
    (corpus / "global" / "basket_drops.md").write_text(LEAF)
    (corpus / "task-specific").mkdir()
    (corpus / "task-specific" / "object_t0_s0_recipe.jsonl").write_text('{"action": "release"}\n')
    build_index(corpus)
    return corpus


def _rpent(args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "rpent.cli.main", *TASK, *args], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, MUJOCO_GL="egl", **(env or {})))


def test_api_planner_sees_the_memory_in_its_prompt(tmp_path):
    root = tmp_path / "memory"
    _corpus(root)
    script = tmp_path / "conv.json"
    script.write_text(json.dumps({"turns": [{"tool_calls": [{"name": "finish", "args": {
        "status": "failure", "summary": "read global/basket_drops.md; stopping"}}]}]}))
    record = tmp_path / "requests.jsonl"
    ep = subprocess.Popen([sys.executable, "-m", "rpent.planners.provider_endpoint", "--script", str(script),
                           "--port", "0", "--record", str(record), "--quiet"], stdout=subprocess.PIPE, text=True)
    try:
        line = ep.stdout.readline()
        assert "listening on" in line, line
        base_url = line.split("listening on ")[1].split()[0]
        out = tmp_path / "run"
        p = _rpent(["--planner", "api", "--model", "anthropic:claude-sonnet-4-5", "--memory-dir", str(root),
                    "--output-dir", str(out)], {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": base_url})
    finally:
        ep.terminate()
        ep.wait(10)
        ep.stdout.close()
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    first = json.loads(record.read_text().splitlines()[0])
    system = json.dumps(first["body"]["system"])
    assert "MEMORY.md" in system and "MEMORY-MARKER-7731" in system and "Basket drops" in system
    assert "task-specific/object_t0_s0_recipe.jsonl" in system
    tr = json.loads((out / "transcript_object_t0_s0.json").read_text())
    read = [f["path"] for f in tr["memory"]["files_read"]]
    assert read == ["MEMORY.md", "global/basket_drops.md", "task-specific/object_t0_s0_recipe.jsonl"]
    assert tr["memory"]["corpus"] == str(root / "libero")
    # the evaluation run wrote nothing into the corpus
    assert sorted(x.relative_to(root).as_posix() for x in root.rglob("*") if x.is_file()) == [
        "libero/MEMORY.md", "libero/global/basket_drops.md", "libero/manifest.json",
        "libero/task-specific/object_t0_s0_recipe.jsonl"]


def test_tampered_corpus_is_refused_and_code_mode_ignores_memory(tmp_path):
    root = tmp_path / "memory"
    corpus = _corpus(root)
    (corpus / "global" / "basket_drops.md").write_text(LEAF.replace("3 cm", "30 cm"))
    p = _rpent(["--planner", "api", "--model", "anthropic:claude-sonnet-4-5", "--memory-dir", str(root),
                "--output-dir", str(tmp_path / "refused")], {"ANTHROPIC_API_KEY": "k"}, timeout=120)
    assert p.returncode == 2 and "global/basket_drops.md was changed" in p.stderr
    assert not (tmp_path / "refused").exists()  # refused before a run directory or server existed
    code = tmp_path / "policy.py"
    code.write_text("robo.view_env_state()\n")
    out = tmp_path / "code"
    p = _rpent(["--code-file", str(code), "--memory-dir", str(root), "--output-dir", str(out)])
    tr = json.loads((out / "transcript_object_t0_s0.json").read_text())
    assert tr["memory"] == {"ignored": "code mode reads no task memory"}, p.stderr[-2000:]
