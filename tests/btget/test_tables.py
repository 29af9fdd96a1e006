"""The tables of bt-get --search and --list-files (btget/display/tables.py): exact lines, pure."""

from __future__ import annotations

from btget.display import tables

COSMIC = "data08_cos.00091949.physics_IDCosmic.merge.DPD_IDCOMM.o4_r653_p26_tid051203"
PHYS = "mc16_13TeV.361107.PowhegPythia8EvtGen_AZNLOCTEQ6L1_Zmumu.deriv.DAOD_PHYS.e3601_p4174"


def doc(name, size, files, sites, t3=(), swarm=None, **extra):
    d = {"name": name, "info_hash": "ab" * 20, "total_size": size, "file_count": files, "sites": list(sites),
         "t2_sites": [s for s in sites if s not in t3], "t3_sites": list(t3), "replicas": "agree",
         "last_published": "2024-05-01T12:00:00Z", **extra}
    if swarm is not None:
        d["swarm"] = swarm
    return d


def test_search_table_aligns_every_column_over_the_answer():
    rows = [tables.dataset_row(doc(COSMIC, 106_744_217, 20, ["UC_T2", "MWT2", "alice_T3"], t3=["alice_T3"],
                                    swarm={"seeds": 2, "leechers": 0, "completed": 4, "sites": ["UC_T2"]})),
            tables.dataset_row(doc(PHYS, 3 * 2**40, 12345, ["UC_T2"],
                                    swarm={"seeds": 0, "leechers": 1, "completed": 0, "sites": []}))]
    assert tables.search_table(rows) == [
        "     SIZE  FILES  SEEDS  T2          T3        DATASET",
        f"101.8 MiB     20      2  UC_T2,MWT2  alice_T3  {COSMIC}",
        f"  3.0 TiB  12345      0  UC_T2       -         {PHYS}",
    ]


def test_unknown_seeds_and_unsettled_replicas_are_said():
    rows = [tables.dataset_row(doc(COSMIC, 512, 1, ["site1", "site2"], replicas="conflict"))]
    assert rows[0].seeds is None
    assert tables.search_table(rows)[1] == f"512 B      1      ?  site1,site2  -   {COSMIC}  (replicas: conflict)"


def test_a_repository_without_tiers_counts_every_holder_a_t2():
    row = tables.dataset_row({"name": COSMIC, "info_hash": "cd" * 20, "total_size": 10, "file_count": 2,
                               "sites": ["site1"]})
    assert (row.t2_sites, row.t3_sites, row.seeds) == (("site1",), (), None)
    assert row.to_json() == {"name": COSMIC, "info_hash": "cd" * 20, "total_size": 10, "file_count": 2,
                             "t2_sites": ["site1"], "t3_sites": [], "seeds": None, "leechers": None,
                             "replicas": "agree", "last_published": ""}


def test_files_table_takes_adler32_from_the_record_and_shows_links():
    entries = [("DPD_IDCOMM.051203._00001.pool.root.1", 2_606_947, None),
               ("sub/DPD_IDCOMM.051203._00010.pool.root.1", 17, None),
               ("latest.root", 0, "sub/DPD_IDCOMM.051203._00010.pool.root.1")]
    record = {"files": [{"lfn": "DPD_IDCOMM.051203._00001.pool.root.1", "size": 2_606_947, "adler32": "0a1b2c3d"},
                        {"lfn": "sub/DPD_IDCOMM.051203._00010.pool.root.1", "size": 17, "adler32": None}]}
    rows = tables.file_rows(entries, record)
    assert tables.files_table(rows) == [
        "   SIZE    BYTES  ADLER32   LFN",
        "2.5 MiB  2606947  0a1b2c3d  DPD_IDCOMM.051203._00001.pool.root.1",
        "   17 B       17  -         sub/DPD_IDCOMM.051203._00010.pool.root.1",
        "    0 B        0  -         latest.root -> sub/DPD_IDCOMM.051203._00010.pool.root.1",
        "total: 3 files, 2.5 MiB (2606964 bytes)",
    ]
    assert tables.files_document("ds", "ef" * 20, rows[:1], of=3) == {
        "name": "ds", "info_hash": "ef" * 20, "file_count": 1, "of": 3, "total_size": 2_606_947,
        "files": [{"lfn": "DPD_IDCOMM.051203._00001.pool.root.1", "size": 2_606_947, "adler32": "0a1b2c3d"}]}


def test_files_table_of_a_torrent_without_a_record():
    rows = tables.file_rows([("a.root", 1, None)], None)
    assert tables.files_table(rows) == ["SIZE  BYTES  ADLER32  LFN", " 1 B      1  -        a.root",
                                         "total: 1 file, 1 B (1 bytes)"]
