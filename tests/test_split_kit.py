"""tools/split_kit.py: the device kit in as few parts as fit beside the working tree in one device call."""

import pytest
from conftest import load_tool

tool = load_tool("split_kit")


def test_the_kit_of_2026_12_06_beside_that_tree_takes_ten_parts():
    # the kit 319,986,248 bytes, sizes and setup-on-device.sh 2 blocks, the tree 32,844 KiB on disk (du): room per
    # part 64 MiB - 1 MiB - 33,632,256 - 8,192 - 4,096 = 32,415,744 bytes, and 319,986,248 / 32,415,744 = 9.87;
    # nine parts (35.6 MB each) were refused by the device tool that day
    assert tool.parts_needed(319_986_248, 8_192, 32_844 * 1024) == 10
    assert tool.parts_needed(319_986_248, 8_192, 20 * tool.MIB) == 8


def test_a_tree_that_leaves_no_room_is_named():
    with pytest.raises(SystemExit, match=r"split_kit: the working tree takes 63\.5 MiB on disk, leaving no room"):
        tool.parts_needed(1000, 0, int(63.5 * tool.MIB))


def test_parts_are_joined_in_order_and_split_again(tmp_path):
    kit = tmp_path / ".devkit"
    (kit / "p1").mkdir(parents=True)
    (kit / "p2").mkdir()
    (kit / "p1" / "part.00").write_bytes(b"a" * 5000)
    (kit / "p2" / "part.01").write_bytes(b"b" * 3000)
    (kit / "p2" / "sizes").write_text("7000 1000\n")
    (kit / "p2" / "setup-on-device.sh").write_text("#!/bin/bash\n")
    written = tool.split(kit, 3)
    assert [f.name for f in written] == ["q1", "q2", "q3"]
    assert sorted(p.name for p in kit.iterdir()) == ["q1", "q2", "q3"]
    assert [(f / f"part.0{i}").stat().st_size for i, f in enumerate(written)] == [2667, 2667, 2666]
    assert sorted(p.name for p in (kit / "q3").iterdir()) == ["part.02", "setup-on-device.sh", "sizes"]
    joined = b"".join((kit / f"q{i + 1}" / f"part.0{i}").read_bytes() for i in range(3))
    assert joined == b"a" * 5000 + b"b" * 3000
    tool.split(kit, 2)  # again, from its own q parts
    assert sorted(p.name for p in kit.iterdir()) == ["q1", "q2"]
    assert (kit / "q1" / "part.00").read_bytes() + (kit / "q2" / "part.01").read_bytes() == joined
    assert (kit / "q2" / "sizes").read_text() == "7000 1000\n"


def test_a_kit_without_parts_or_its_setup_is_named(tmp_path):
    kit = tmp_path / ".devkit"
    kit.mkdir()
    with pytest.raises(SystemExit, match=r"split_kit: no .*\.devkit/\*/part\.\* : build the kit first"):
        tool.split(kit, 2)
    (kit / "p1").mkdir()
    (kit / "p1" / "part.00").write_bytes(b"x")
    with pytest.raises(SystemExit, match=r"has no \['sizes', 'setup-on-device.sh'\]: build the kit again"):
        tool.split(kit, 1)
