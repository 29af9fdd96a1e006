"""The site keeps one parsed torrent per running seed, not per dataset it knows: a dataset is
registered by where its .torrent is, read and parsed when a seed starts (a real libtorrent session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torrents.build import build_torrent
from torrents.errors import NotFound

from btserver.seeder import Seedable, Seeder


def dataset(root: Path, name: str, content: bytes) -> tuple[str, Path]:
    (root / name).mkdir(parents=True)
    (root / name / "f.root").write_bytes(content)
    data, meta = build_torrent(name, [("f.root", root / name / "f.root")])
    path = root / f"{name}.torrent"
    path.write_bytes(data)
    return meta.info_hash, path


@pytest.fixture
def seeder():
    s = Seeder("127.0.0.2", 0)
    s.open()
    yield s
    s.close()


def test_a_known_dataset_is_read_only_when_a_seed_starts(seeder, tmp_path):
    ih, torrent = dataset(tmp_path, "ds.one", b"x" * 70_000)
    kept = torrent.read_bytes()
    torrent.unlink()
    seeder.register(Seedable(ih, "ds.one", torrent, str(tmp_path)))  # nothing read yet
    assert seeder.seedable() == [ih]
    with pytest.raises(NotFound) as info:
        seeder.start(ih)
    assert "ds.one: cannot read its torrent" in info.value.problem
    torrent.write_bytes(kept)
    assert seeder.start(ih).name == "ds.one"
    assert seeder.seeding() == [ih]


def test_a_torrent_rebuilt_since_registration_is_not_seeded_as_the_old_version(seeder, tmp_path):
    ih, torrent = dataset(tmp_path, "ds.one", b"x" * 70_000)
    seeder.register(Seedable(ih, "ds.one", torrent, str(tmp_path)))
    _, other = dataset(tmp_path / "v2", "ds.one", b"y" * 80_000)
    torrent.write_bytes(other.read_bytes())
    with pytest.raises(NotFound) as info:
        seeder.start(ih)
    assert info.value.problem == "ds.one: its torrent is another version now"
    assert seeder.seeding() == []
