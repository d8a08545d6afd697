"""``rpent-memory`` takes --memory-dir/--robot before or after its subcommand (the hints that errors
print use the latter form)."""

from __future__ import annotations

from rpent.cli.memory import main


def test_memory_dir_after_the_subcommand_works_like_before(tmp_path, capsys):
    root = tmp_path / "mem"
    assert main(["build-index", "--memory-dir", str(root)]) == 0
    assert (root / "libero" / "MEMORY.md").is_file()
    assert main(["--memory-dir", str(root), "validate"]) == 0
    assert main(["validate", "--memory-dir", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "no memory corpus at" in err and "--memory-dir" in err and "\n" == err[-1] and err.count("\n") == 1
