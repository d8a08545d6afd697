"""``rpent-train compact`` and ``rpent-train plot``: their own parsers (shown in the CLI reference)
and their refusals, without torch or a checkpoint."""

from __future__ import annotations

import pytest

from rpent.cli import train


def test_subcommand_parsers_name_their_arguments():
    a = train.build_compact_parser().parse_args(["SRC", "DEST", "--dtype", "bfloat16"])
    assert (a.src, a.dest, a.dtype) == ("SRC", "DEST", "bfloat16")
    assert train.build_compact_parser().parse_args(["S", "D"]).dtype == "float16"
    assert train.build_plot_parser().parse_args(["OUT"]).output_dir == "OUT"
    for p in (train.build_compact_parser(), train.build_plot_parser()):
        assert all(a.help for a in p._actions), p.prog  # every argument explained in --help and the reference


def test_plot_without_metrics_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        train.main(["plot", str(tmp_path)])
    assert exc.value.code == 2
    assert "metrics.jsonl does not exist" in capsys.readouterr().err


def test_compact_of_a_directory_without_a_checkpoint_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        train.main(["compact", str(tmp_path), str(tmp_path / "copy")])
    assert exc.value.code == 2
    assert capsys.readouterr().err.startswith("rpent-train compact: ")
