"""Split the device kit into as few parts as let each device call carry its part beside the working tree.

    python tools/split_kit.py            # from the project's root, after bash ../shared/device/prepare.sh

``prepare.sh`` writes the kit (about 320 MB) as parts of 56 MiB under ``.devkit/p1 .. pN``. A device call carries
the working tree (tracked files and untracked ones git does not ignore) and the paths named in ``carry``, 64 MiB
at most, counted as the space the files take on disk (their allocated blocks, not their bytes: on 2026-12-06 the
tree's 1,061 files took 32.1 MiB, their bytes 29.7 MiB). This joins the kit's parts (``.devkit/*/part.*``, in
their numbering), picks the fewest parts that fit beside the tree with :data:`MARGIN` to spare, and writes them
as ``.devkit/q1 .. qN``, one part each, ``sizes`` and ``setup-on-device.sh`` in the last; the parts it read are
removed. Run it again after the tree grows (a landed data set): it re-splits its own ``q`` parts.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

MIB = 1 << 20
LIMIT = 64 * MIB  # what one device call may carry: the working tree and its carried paths
MARGIN = 1 * MIB  # for what the tree gains between this split and the lease (a figure, a README)
BLOCK = 4096
EXTRAS = ("sizes", "setup-on-device.sh")


def on_disk(size: int) -> int:
    """Bytes a file of ``size`` bytes takes on disk, in whole blocks."""
    return math.ceil(size / BLOCK) * BLOCK


def tree_on_disk(root: Path) -> int:
    """Bytes on disk of what a device call carries from ``root`` besides ``carry``: tracked files and untracked ones
    that git does not ignore."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    files = [root / name.decode() for name in listed if name]
    return sum(f.stat().st_blocks * 512 for f in files if f.is_file())


def parts_needed(kit_bytes: int, extras_bytes: int, tree_bytes: int, limit: int = LIMIT) -> int:
    """The fewest parts of ``kit_bytes`` such that the tree, one part and (in the last part) the extras fit
    ``limit`` less :data:`MARGIN`."""
    room = limit - MARGIN - tree_bytes - extras_bytes - BLOCK  # a part's last block may be partly filled
    if room <= 0:
        raise SystemExit(
            f"split_kit: the working tree takes {tree_bytes / MIB:.1f} MiB on disk, leaving no room for a part of the "
            f"kit in a device call of {limit / MIB:.0f} MiB: ignore or remove what the device does not need"
        )
    return math.ceil(kit_bytes / room)


def kit_parts(kit: Path) -> list[Path]:
    """The kit's parts in their order (``part.00``, ``part.01``, ...), from ``prepare.sh``'s or an earlier split."""
    parts = sorted(kit.glob("*/part.*"), key=lambda p: p.name)
    if not parts:
        raise SystemExit(f"split_kit: no {kit}/*/part.* : build the kit first (bash ../shared/device/prepare.sh ...)")
    return parts


def split(kit: Path, n: int) -> list[Path]:
    """Join the parts under ``kit`` and write them again as ``n`` parts in ``kit/q1 .. qn``."""
    parts, extras = kit_parts(kit), {name: next(kit.glob(f"*/{name}"), None) for name in EXTRAS}
    missing = [name for name, path in extras.items() if path is None]
    if missing:
        raise SystemExit(f"split_kit: {kit} has no {missing}: build the kit again (bash ../shared/device/prepare.sh)")
    stage = kit / ".split"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    for name, path in extras.items():
        shutil.copy(path, stage / name)
    data = b"".join(p.read_bytes() for p in parts)  # about 320 MB: held at once, written out in n slices
    size = math.ceil(len(data) / n)
    out = []
    for i in range(n):
        folder = stage / f"q{i + 1}"
        folder.mkdir()
        (folder / f"part.{i:02d}").write_bytes(data[i * size : (i + 1) * size])
        out.append(folder)
    for name in EXTRAS:
        (stage / name).rename(out[-1] / name)
    for old in [p for p in kit.iterdir() if p.is_dir() and p != stage]:
        shutil.rmtree(old)
    for folder in out:
        folder.rename(kit / folder.name)
    stage.rmdir()
    return [kit / folder.name for folder in out]


def main() -> None:
    root = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True).stdout.strip())
    kit = root / ".devkit"
    parts = kit_parts(kit)
    kit_bytes = sum(p.stat().st_size for p in parts)
    extras = sum(on_disk(p.stat().st_size) for name in EXTRAS for p in kit.glob(f"*/{name}"))
    tree = tree_on_disk(root)
    n = parts_needed(kit_bytes, extras, tree)
    written = split(kit, n)
    largest = max(on_disk(p.stat().st_size) for f in written for p in f.iterdir())
    print(
        f"split_kit: {kit_bytes / MIB:.1f} MiB of kit in {n} parts ({', '.join(f.name for f in written)}); the tree "
        f"takes {tree / MIB:.1f} MiB on disk, so a call carries at most {(tree + largest + extras) / MIB:.1f} MiB of "
        f"{LIMIT / MIB:.0f}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
