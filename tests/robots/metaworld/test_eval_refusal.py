"""``rpent-eval --robot metaworld`` is refused with one line naming what to use instead (rpent-eval's env
workers are LIBERO simulator processes), and nothing is started or written."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_rpent_eval_refuses_metaworld_with_the_batch_command(tmp_path):
    out = subprocess.run([sys.executable, "-m", "rpent.cli.eval", "--robot", "metaworld", "--logs-dir", str(tmp_path)],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("rpent-eval: error: --robot metaworld is not supported by rpent-eval")
    assert "rpent-batch --robot metaworld --suites mt10" in lines[0]
    assert list(tmp_path.iterdir()) == []  # no log directory: nothing ran
