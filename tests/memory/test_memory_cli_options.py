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


def _one_line(err: str) -> str:
    assert "Traceback" not in err, err
    return err.strip().splitlines()[-1]


def test_a_non_utf8_or_directory_leaf_is_one_named_line_not_a_traceback(tmp_path, capsys):
    root = tmp_path / "mem"
    (root / "libero" / "global").mkdir(parents=True)
    bad = root / "libero" / "global" / "garbled.md"
    bad.write_bytes(b"\xff\xfe\x00not text")
    assert main(["--memory-dir", str(root), "build-index"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert str(bad) in line and "not UTF-8 text" in line and "remove it" in line
    assert not (root / "libero" / "MEMORY.md").exists()  # nothing published
    assert main(["--memory-dir", str(root), "validate"]) == 1  # validate lists problems on stdout
    out = capsys.readouterr()
    assert f"rpent-memory: {bad}: not UTF-8 text" in out.out and "Traceback" not in out.err
    bad.unlink()
    folder = root / "libero" / "global" / "folder.md"
    folder.mkdir()
    assert main(["--memory-dir", str(root), "build-index"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert str(folder) in line and "is a directory, not a leaf file" in line
