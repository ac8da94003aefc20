"""Where the time went: Snakemake benchmark files and run records -> one table and its Markdown."""

import json

import pytest

from kpadstudy import timings

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def bench(root, rule, job, seconds):
    path = root / "results" / "benchmarks" / rule / f"{job}.tsv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + f"{seconds}\t0:00:00\t1\t1\t1\t1\t0\t0\t50\t1\n")
    return str(path.relative_to(root))


def test_jobs_their_wall_time_and_each_runs_boot_and_measurement(tmp_path):
    run = "M/mix/van/r1"
    (tmp_path / "results" / "runs" / "M" / "mix" / "van").mkdir(parents=True)
    (tmp_path / "results" / "runs" / f"{run}.json").write_text(
        json.dumps(
            {"boot_s": 43.04, "model_load_s": 2.3, "engine_init_s": 14.7, "compile_s": 4.7, "duration_s": 31.46}
            | {"status": "ok"}
        )
    )
    files = {
        "model": [bench(tmp_path, "model", "M", 37.2)],
        "run": [bench(tmp_path, "run", run, 103.14), bench(tmp_path, "run", "M/mix/suf/r1", 96.0)],
        "equivalence": [bench(tmp_path, "equivalence", "M/mix/K8", 62.5)],
    }
    table = timings.timings(files, root=str(tmp_path))
    none = dict.fromkeys(["boot_s", "model_load_s", "engine_init_s", "compile_s", "measured_s", "status"])
    assert table.astype(object).where(table.notna(), None).to_dict("records") == [
        {"stage": "model", "job": "M", "wall_s": 37.2, **none},
        {
            "stage": "run",
            "job": run,
            "wall_s": 103.14,
            "boot_s": 43.04,
            "model_load_s": 2.3,
            "engine_init_s": 14.7,
            "compile_s": 4.7,
            "measured_s": 31.46,
            "status": "ok",
        },
        {"stage": "run", "job": "M/mix/suf/r1", "wall_s": 96.0, **none},  # no record
        {"stage": "equivalence", "job": "M/mix/K8", "wall_s": 62.5, **none},
    ]
    text = timings.summary(table)
    # the rest of the boot: 43.04 - 2.3 - 14.7 = 26.04
    assert (
        "| model download / conversion | 1 | 37 |  |  |  |\n| run | 2 | 199 | 43 | 26 | 31 |\n"
        "| equivalence check | 1 | 62 |  |  |  |\n" in text
    )
    assert (
        f"| run | {run} | 103 | 43 | 2 | 15 | 5 | 26 | 31 | ok |\n| run | M/mix/suf/r1 | 96 |  |  |  |  |  |  |  |\n"
        in text
    )


def test_a_file_that_is_not_a_benchmark_is_refused_by_name(tmp_path):
    path = tmp_path / "results" / "benchmarks" / "run" / "x.tsv"
    path.parent.mkdir(parents=True)
    path.write_text("a\tb\n1\t2\n")
    with pytest.raises(
        KeyError, match=r"results/benchmarks/run/x.tsv: no column 's' \(not a Snakemake benchmark file\)"
    ):
        timings.timings({"run": ["results/benchmarks/run/x.tsv"]}, root=str(tmp_path))
    with pytest.raises(ValueError):
        timings.job_name("results/other/run/x.tsv", "run")


@pytest.mark.parametrize("text", ["s\th:m:s\n", "s\th:m:s\nNA\tNA\n"], ids=["header only", "NA"])
def test_a_benchmark_file_without_a_wall_time_is_refused_by_name(tmp_path, text):
    path = tmp_path / "results" / "benchmarks" / "run" / "x.tsv"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(
        ValueError,
        match=r"results/benchmarks/run/x.tsv: no wall time in column 's' \(an empty or cut-off benchmark file\)",
    ):
        timings.timings({"run": ["results/benchmarks/run/x.tsv"]}, root=str(tmp_path))


def test_the_rest_of_the_boots_says_how_many_boots_it_covers():
    """An older record without the boot's parts beside a new one (a lease's preseeded runs): 61 - 2 - 15 = 44."""
    table = timings.pd.DataFrame(
        [
            {"stage": "run", "job": "a", "wall_s": 90.0, "boot_s": 61.0, "model_load_s": 2.0, "engine_init_s": 15.0},
            {"stage": "run", "job": "b", "wall_s": 80.0, "boot_s": 50.0},
        ],
        columns=timings.COLUMNS,
    )
    text = timings.summary(table)
    assert "| run | 2 | 170 | 111 | 44 (1 of 2 boots) |  |\n" in text
    assert "| run | a | 90 | 61 | 2 | 15 |  | 44 |  |  |\n| run | b | 80 | 50 |  |  |  |  |  |  |\n" in text
