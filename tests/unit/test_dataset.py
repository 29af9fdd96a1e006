"""torrents.dataset: names, LFNs, the Dataset model, directories and manifests."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from torrents.dataset import (Dataset, DatasetFile, from_directory, parse_manifest, read_manifest, scan_directory,
                              validate_lfn, validate_name)
from torrents.errors import DatasetError

NAME = "data08_cos.00091949.physics_IDCosmic.merge.DPD_IDCOMM.o4_r653_p26_tid051203"
LFN1 = "DPD_IDCOMM.051203._00001.pool.root.1"
LFN5 = "DPD_IDCOMM.051203._00005.pool.root.1"
PNFS = "/pnfs/uchicago.edu/atlasdatadisk/data08_cos/DPD_IDCOMM"


def message(exc_info) -> str:
    return str(exc_info.value)


# names and LFNs

@pytest.mark.parametrize("name", [
    NAME,
    "mc08.105200.T1_McAtNlo_Jimmy.recon.AOD.e357_s462_r541_tid026562",
    "user09.JohnDoe.ganga.1234.20090612",
    "data09_900GeV.00141749.physics_MinBias.merge.AOD.f187_m305",
])
def test_real_atlas_names_are_valid(name):
    assert validate_name(name) == name


@pytest.mark.parametrize("name, expected", [
    ("a/b", "a/b: dataset name contains '/'"),
    ("/abs", "/abs: dataset name contains '/'"),
    ("..", "..: path component '..' is not allowed"),
    (".", ".: path component '.' is not allowed"),
    ("", "'': dataset name is empty"),
    (".hidden", ".hidden: dataset name starts with '.'"),
    ("a\x00b", "a\x00b: control character in path component"),
    ("tab\there", "tab\there: control character in path component"),
    ("del\x7f", "del\x7f: control character in path component"),
    ("back\\slash", "back\\slash: backslash in path component"),
    ("x" * 256, "x" * 40 + "…: dataset name longer than 255 characters"),
    (None, "None: dataset name is not a string"),
])
def test_bad_names_are_refused(name, expected):
    with pytest.raises(DatasetError) as info:
        validate_name(name)
    assert message(info) == expected


def test_name_of_255_characters_is_fine():
    assert validate_name("x" * 255) == "x" * 255


@pytest.mark.parametrize("lfn, parts", [
    (LFN1, (LFN1,)),
    ("log/DPD_IDCOMM.051203._00001.job.log.tgz.1", ("log", "DPD_IDCOMM.051203._00001.job.log.tgz.1")),
    ("a/b/c/.hidden", ("a", "b", "c", ".hidden")),
])
def test_real_lfns_are_valid(lfn, parts):
    assert validate_lfn(lfn) == parts


@pytest.mark.parametrize("lfn, expected", [
    ("/etc/passwd", "/etc/passwd: file name is absolute"),
    ("../x", "../x: path component '..' is not allowed"),
    ("a/../../x", "a/../../x: path component '..' is not allowed"),
    ("./x", "./x: path component '.' is not allowed"),
    ("a//b", "a//b: path component '' is not allowed"),
    ("a/", "a/: path component '' is not allowed"),
    ("", "'': file name is empty"),
    ("a\nb", "a\nb: control character in path component"),
    ("a/\x1b[2J", "a/\x1b[2J: control character in path component"),
    ("a\\..\\b", "a\\..\\b: backslash in path component"),
    ("x" * 4097, "x" * 40 + "…: file name longer than 4096 characters"),
    (b"bytes", "b'bytes': file name is not a string"),
])
def test_bad_lfns_are_refused(lfn, expected):
    with pytest.raises(DatasetError) as info:
        validate_lfn(lfn)
    assert message(info) == expected


# DatasetFile and Dataset

def test_dataset_file_normalises_adler32():
    assert DatasetFile(LFN1, 10, "ABCD").adler32 == "0000abcd"
    assert DatasetFile(LFN1, 10, "0a0B0c0D").adler32 == "0a0b0c0d"
    assert DatasetFile(LFN1, 10, pfns=["/a", "/b"]).pfns == ("/a", "/b")


@pytest.mark.parametrize("kwargs, expected", [
    ({"size": -1}, f"{LFN1}: bad size -1"),
    ({"size": True}, f"{LFN1}: bad size True"),
    ({"size": 1.5}, f"{LFN1}: bad size 1.5"),
    ({"adler32": "xyz"}, f"{LFN1}: bad adler32 'xyz'"),
    ({"adler32": "123456789"}, f"{LFN1}: bad adler32 '123456789'"),
    ({"adler32": 1234}, f"{LFN1}: bad adler32 1234"),
    ({"pfns": "/pnfs/one/path"}, f"{LFN1}: bad PFN list '/pnfs/one/path'"),
    ({"pfns": ("/ok", "")}, f"{LFN1}: bad PFN list ('/ok', '')"),
])
def test_dataset_file_refuses_bad_fields(kwargs, expected):
    args = {"size": 1, **kwargs}
    with pytest.raises(DatasetError) as info:
        DatasetFile(LFN1, **args)
    assert message(info) == expected


def test_dataset_sorts_files_and_totals_sizes():
    ds = Dataset(NAME, (DatasetFile(LFN5, 5, "1"), DatasetFile("log/x", 3), DatasetFile(LFN1, 1)))
    assert [f.lfn for f in ds.files] == [LFN1, LFN5, "log/x"]
    assert ds.total_size == 9
    assert ds.record() == {"name": NAME, "description": "", "total_size": 9, "files": [
        {"lfn": LFN1, "size": 1, "adler32": None},
        {"lfn": LFN5, "size": 5, "adler32": "00000001"},
        {"lfn": "log/x", "size": 3, "adler32": None}]}


def test_dataset_record_leaves_pfns_out():
    ds = Dataset(NAME, (DatasetFile(LFN1, 1, pfns=("/secret/pool/path",)),))
    assert "pfns" not in ds.record()["files"][0]
    assert "/secret" not in json.dumps(ds.record())


def test_datasets_compare_by_content_not_source():
    files = (DatasetFile(LFN1, 1),)
    assert Dataset(NAME, files, source="a.json") == Dataset(NAME, files, source="b.tsv")


@pytest.mark.parametrize("lfns, expected", [
    ([LFN1, LFN1], f"{NAME}/{LFN1}: listed twice"),
    (["a", "a/b"], f"{NAME}/a: is both a file and a directory"),
    (["x/y", "x/y/z/w"], f"{NAME}/x/y: is both a file and a directory"),
    ([], f"{NAME}: dataset has no files"),
])
def test_dataset_refuses_duplicates_clashes_and_emptiness(lfns, expected):
    with pytest.raises(DatasetError) as info:
        Dataset(NAME, tuple(DatasetFile(lfn, 1) for lfn in lfns))
    assert message(info) == expected


def test_dataset_refuses_a_bad_name():
    with pytest.raises(DatasetError) as info:
        Dataset("../up", (DatasetFile(LFN1, 1),))
    assert message(info) == "../up: dataset name contains '/'"


# directories

def write(path, data: bytes = b"x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_from_directory_walks_nested_dirs_and_keeps_hidden_files(tmp_path):
    root = tmp_path / NAME
    write(root / LFN5, b"5" * 5)
    write(root / LFN1, b"1")
    write(root / "log" / "deep" / "job.log", b"log")
    write(root / ".hidden", b"hi")
    write(root / ".git" / "config", b"cfg")
    (root / "empty_dir").mkdir()
    ds = from_directory(root)
    assert ds.name == NAME
    assert [(f.lfn, f.size) for f in ds.files] == [(".git/config", 3), (".hidden", 2), (LFN1, 1), (LFN5, 5),
                                                    ("log/deep/job.log", 3)]
    assert ds.files[2].pfns == (str(root / LFN1),)
    assert ds.source == str(root)
    scan = scan_directory(root, exclude=[".*"])
    assert [f.lfn for f in scan.dataset.files] == [LFN1, LFN5, "log/deep/job.log"]
    assert scan.excluded == ((".git", "excluded by '.*'"), (".hidden", "excluded by '.*'"),
                             ("empty_dir", "empty directory (a torrent cannot carry one)"))
    assert scan.problems == ()


def test_links_inside_the_dataset_are_kept_and_links_out_are_followed_or_refused(tmp_path):
    root = tmp_path / "data" / NAME
    write(root / "net" / "xt_TCPMSS.c", b"upper")
    write(root / "net" / "xt_tcpmss.c", b"lower")
    os.makedirs(root / "arch" / "arm64")
    os.symlink("../../net", root / "arch" / "arm64" / "net")  # a directory link inside
    os.symlink("xt_TCPMSS.c", root / "net" / "alias.c")  # a file link inside
    os.symlink("missing.c", root / "net" / "dangling.c")  # dangling, but inside: a link like any other
    write(tmp_path / "data" / "pool" / "replica", b"pool bytes")
    os.symlink(tmp_path / "data" / "pool" / "replica", root / "from_pool")  # a replica elsewhere in the roots
    write(tmp_path / "elsewhere" / "secret", b"no")
    os.symlink(tmp_path / "elsewhere" / "secret", root / "escape")
    os.symlink(tmp_path / "elsewhere", root / "outdir")
    os.mkfifo(root / "fifo")
    scan = scan_directory(root, allowed_roots=[str(tmp_path / "data")])
    got = {f.lfn: (f.size, f.symlink) for f in scan.dataset.files}
    assert got == {"arch/arm64/net": (0, "net"), "net/alias.c": (0, "net/xt_TCPMSS.c"),
                   "from_pool": (10, None), "net/xt_TCPMSS.c": (5, None), "net/xt_tcpmss.c": (5, None)}
    assert {(Path(p.subject).name, p.problem) for p in scan.problems} == {
        ("dangling.c", "link to net/missing.c, which the dataset does not carry (missing, excluded or refused); "
                       "refused"),
        ("escape", f"link to {tmp_path / 'elsewhere' / 'secret'} leaves the storage roots; refused"),
        ("outdir", f"directory link to {tmp_path / 'elsewhere'} leaves the dataset; not followed"),
        ("fifo", "not a regular file, a directory or a link; refused")}
    whole = scan_directory(root, allowed_roots=[str(tmp_path / "data")], require_whole=True)
    assert whole.dataset is None and "must be whole" in whole.problems[-1].problem


def test_from_directory_follows_file_symlinks_and_takes_a_name(tmp_path):
    target = tmp_path / "pool" / "00060000000017F53C0"
    write(target, b"abc")
    root = tmp_path / "farm"
    root.mkdir()
    os.symlink(target, root / LFN1)
    ds = from_directory(root, name=NAME)
    assert ds.name == NAME
    assert [(f.lfn, f.size) for f in ds.files] == [(LFN1, 3)]


def test_from_directory_errors(tmp_path):
    with pytest.raises(DatasetError) as info:
        from_directory(tmp_path / "missing")
    assert message(info) == f"{tmp_path / 'missing'}: not a directory"
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError) as info:
        from_directory(tmp_path / "empty")
    assert message(info) == "empty: dataset has no files"
    root = tmp_path / "broken"
    root.mkdir()
    os.symlink(tmp_path / "nowhere", root / "dangling")
    with pytest.raises(DatasetError) as info:
        from_directory(root)
    assert message(info) == f"{root / 'dangling'}: link to {tmp_path / 'nowhere'} leads nowhere outside the " \
                            "dataset; refused"


# manifests

def test_json_manifest(tmp_path):
    doc = {"name": NAME, "description": "cosmics", "files": [
        {"lfn": LFN5, "size": 5, "adler32": "0a0b0c0d", "pfns": ["/dcache/pool5/data/00060000000017F53C0",
                                                                  f"{PNFS}/{LFN5}"]},
        {"lfn": LFN1, "size": 1}]}
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    [ds] = read_manifest(path)
    assert ds.name == NAME and ds.description == "cosmics"
    assert ds.source == str(path)
    assert [f.lfn for f in ds.files] == [LFN1, LFN5]
    assert ds.files[1].pfns == ("/dcache/pool5/data/00060000000017F53C0", f"{PNFS}/{LFN5}")
    assert ds.files[1].adler32 == "0a0b0c0d"


def test_json_manifest_with_several_datasets_and_a_bare_pfn(tmp_path):
    doc = [{"name": "ds1", "files": [{"lfn": "a", "size": 1, "pfns": "/data/a"}]},
           {"name": "ds2", "files": [{"lfn": "b", "size": 2}]}]
    path = tmp_path / "several.json"
    path.write_text(json.dumps(doc))
    ds1, ds2 = read_manifest(path)
    assert (ds1.name, ds1.files[0].pfns) == ("ds1", ("/data/a",))
    assert (ds2.name, ds2.total_size) == ("ds2", 2)


TSV = f"""# dataset\tlfn\tsize\tadler32\tpfns...
{NAME}\t{LFN1}\t100\t0a0b0c0d\t/pool/1\t{PNFS}/{LFN1}

{NAME}\t{LFN5}\t500\t-\t{PNFS}/{LFN5}
other.dataset\tx.root\t7\t\t/data/"quoted" name
"""


def test_tsv_manifest(tmp_path):
    path = tmp_path / "site.tsv"
    path.write_text(TSV)
    ds, other = read_manifest(path)
    assert ds.name == NAME
    assert [(f.lfn, f.size, f.adler32) for f in ds.files] == [(LFN1, 100, "0a0b0c0d"), (LFN5, 500, None)]
    assert ds.files[0].pfns == ("/pool/1", f"{PNFS}/{LFN1}")
    assert other.files[0].pfns == ('/data/"quoted" name',)


def test_manifest_format_is_sniffed_without_a_known_suffix(tmp_path):
    tsv = tmp_path / "site.manifest"
    tsv.write_text(TSV)
    assert [d.name for d in read_manifest(tsv)] == [NAME, "other.dataset"]
    js = tmp_path / "site.list"
    js.write_text(json.dumps({"name": "ds", "files": [{"lfn": "a", "size": 1}]}))
    assert [d.name for d in read_manifest(js)] == ["ds"]


RUCIO = [
    {"scope": "data08_cos", "name": LFN5, "bytes": 500, "adler32": "0a0b0c0d", "dataset": NAME,
     "pfns": {f"root://xrootd.example/{PNFS}/{LFN5}": {"priority": 2, "type": "DISK"},
              "/dcache/pool5/data/00060000000017F53C0": {"priority": 1, "type": "DISK"}}},
    {"scope": "data08_cos", "name": LFN1, "bytes": 100, "adler32": None, "dataset": NAME,
     "pfns": [f"{PNFS}/{LFN1}", f"root://xrootd.example/{PNFS}/{LFN1}"]},
]


def test_rucio_manifest_orders_pfns_by_priority(tmp_path):
    path = tmp_path / "replicas.json"
    path.write_text(json.dumps(RUCIO))
    [ds] = read_manifest(path)
    assert ds.name == NAME
    assert [(f.lfn, f.size) for f in ds.files] == [(LFN1, 100), (LFN5, 500)]
    assert ds.files[1].pfns == ("/dcache/pool5/data/00060000000017F53C0", f"root://xrootd.example/{PNFS}/{LFN5}")
    assert ds.files[0].pfns == (f"{PNFS}/{LFN1}", f"root://xrootd.example/{PNFS}/{LFN1}")


def test_rucio_manifest_takes_the_dataset_name_from_the_argument(tmp_path):
    entries = [{k: v for k, v in e.items() if k != "dataset"} for e in RUCIO]
    path = tmp_path / "replicas.json"
    path.write_text(json.dumps(entries))
    [ds] = read_manifest(path, dataset="given.name")
    assert ds.name == "given.name" and len(ds.files) == 2
    with pytest.raises(DatasetError) as info:
        read_manifest(path)
    assert message(info) == f"{path}[0]: no dataset name (no 'dataset' key and none given)"


@pytest.mark.parametrize("text, expected", [
    ("{not json", "m.json: not valid JSON (Expecting property name enclosed in double quotes at line 1)"),
    ('{"name": "ds", "files": "a"}', "m.json: 'files' is not a list"),
    ('{"files": []}', "m.json: missing field 'name'"),
    ('{"name": "ds", "files": []}', "m.json: ds: dataset has no files"),
    ('{"name": "ds", "files": ["a"]}', "m.json: files[0]: expected an object"),
    ('{"name": "ds", "files": [{"size": 1}]}', "m.json: files[0]: missing field 'lfn'"),
    ('{"name": "ds", "files": [{"lfn": "a"}]}', "m.json: files[0]: missing field 'size'"),
    ('{"name": "ds", "files": [{"lfn": "a", "size": 1.5}]}', "m.json: files[0]: bad size 1.5"),
    ('{"name": "ds", "files": [{"lfn": "a", "size": "1e3"}]}', "m.json: files[0]: bad size '1e3'"),
    ('{"name": "ds", "files": [{"lfn": "a", "size": -3}]}', "m.json: files[0]: negative size -3"),
    ('{"name": "ds", "files": [{"lfn": "../a", "size": 1}]}',
     "m.json: files[0]: ../a: path component '..' is not allowed"),
    ('{"name": "ds", "files": [{"lfn": "a", "size": 1, "adler32": 5}]}', "m.json: files[0]: a: bad adler32 5"),
    ('{"name": "ds", "files": [{"lfn": "a", "size": 1, "pfns": [1]}]}',
     "m.json: files[0]: bad pfns [1] (expected a list of paths)"),
    ('{"name": "d/s", "files": [{"lfn": "a", "size": 1}]}', "m.json: d/s: dataset name contains '/'"),
    ('{"name": "ds", "files": [{"lfn": "a", "size": 1}, {"lfn": "a", "size": 1}]}', "m.json: ds/a: listed twice"),
    ('{"name": "ds", "description": 5, "files": [{"lfn": "a", "size": 1}]}', "m.json: bad description 5"),
    ('[1]', "m.json[0]: expected an object"),
    ('[{"name": "a", "bytes": 1}]', "m.json[0]: no dataset name (no 'dataset' key and none given)"),
    ('[{"dataset": "ds", "bytes": 1}]', "m.json[0]: missing field 'name'"),
    ('[{"dataset": "ds", "name": "a"}]', "m.json[0]: missing field 'bytes'"),
    ('[{"dataset": "ds/x", "name": "a", "bytes": 1}]', "m.json[0]: ds/x: dataset name contains '/'"),
])
def test_bad_json_manifests_name_the_file(tmp_path, text, expected):
    path = tmp_path / "m.json"
    path.write_text(text)
    with pytest.raises(DatasetError) as info:
        read_manifest(path)
    assert message(info) == f"{tmp_path}/{expected}"


@pytest.mark.parametrize("line, expected", [
    ("ds\ta\t1\t-", "m.tsv:3: expected DATASET, LFN, SIZE, ADLER32, PFN..."),
    ("ds\ta\tbig\t-\t/p", "m.tsv:3: bad size 'big'"),
    ("ds\ta\t1_000\t-\t/p", "m.tsv:3: bad size '1_000'"),
    ("ds\ta\t--5\t-\t/p", "m.tsv:3: bad size '--5'"),
    ("ds\ta\t-5\t-\t/p", "m.tsv:3: negative size -5"),
    ("ds\t/etc/passwd\t1\t-\t/p", "m.tsv:3: /etc/passwd: file name is absolute"),
    ("ds\ta\t1\tzz\t/p", "m.tsv:3: a: bad adler32 'zz'"),
    ("../ds\ta\t1\t-\t/p", "m.tsv:3: ../ds: dataset name contains '/'"),
    ("ds\tok\t1\t-\t/p", "m.tsv: ds/ok: listed twice"),
])
def test_bad_tsv_manifests_name_the_file_and_line(tmp_path, line, expected):
    path = tmp_path / "m.tsv"
    path.write_text(f"# comment\nds\tok\t1\t-\t/p\n{line}\n")
    with pytest.raises(DatasetError) as info:
        read_manifest(path)
    assert message(info) == f"{tmp_path}/{expected}"


def test_unreadable_manifest(tmp_path):
    with pytest.raises(DatasetError) as info:
        read_manifest(tmp_path / "missing.json")
    assert message(info).startswith(f"{tmp_path}/missing.json: cannot read manifest ([Errno 2] No such file")
    bad = tmp_path / "latin1.tsv"
    bad.write_bytes(b"ds\t\xe9\t1\t-\t/p\n")
    with pytest.raises(DatasetError) as info:
        read_manifest(bad)
    assert message(info).startswith(f"{bad}: cannot read manifest ('utf-8' codec can't decode")


def test_parse_manifest_from_text():
    [ds] = parse_manifest('{"name": "ds", "files": [{"lfn": "a", "size": 1}]}', subject="upload")
    assert ds.source == "upload"
    [ds] = parse_manifest("ds\ta\t1\t-\t/p\n")
    assert ds.files[0].pfns == ("/p",)


# property tests: a manifest is read or refused with a DatasetError, never anything else

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**12) | st.floats(allow_nan=False) | st.sampled_from(
        ["", "a", "ds", "../x", "/abs", "a/b", "0a0b0c0d", "-", "12", "x\ty"]),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(
        st.sampled_from(["name", "files", "lfn", "size", "adler32", "pfns", "dataset", "bytes", "priority",
                         "description", "scope"]), c, max_size=6),
    max_leaves=25)


@settings(max_examples=200, deadline=None)
@given(json_values, st.sampled_from([None, "given.ds"]))
def test_json_shaped_manifests_raise_only_dataset_error(doc, dataset):
    try:
        parse_manifest(json.dumps(doc), subject="m.json", dataset=dataset, tsv=False)
    except DatasetError as exc:
        assert str(exc).startswith("m.json")


cells = st.sampled_from(["ds", "a", "a/b", "..", "1", "-1", "--1", "1.5", "-", "zz", "0a0b0c0d", "/p", "", " ",
                         "#", '"', "\x00"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(cells, max_size=7).map("\t".join), max_size=6).map("\n".join))
def test_tsv_shaped_manifests_raise_only_dataset_error(text):
    try:
        parse_manifest(text, subject="m.tsv", tsv=True)
    except DatasetError as exc:
        assert str(exc).startswith("m.tsv")
