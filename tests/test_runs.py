"""Configurations, interleaved run order and the command lines of a run."""

import json

import pytest

from kpadstudy import runs

CONFIG = {
    "server": {
        "cudagraph_mode": "FULL_AND_PIECEWISE",
        "gpu_memory_utilization": 0.85,
        "max_model_len": 4096,
        "seed": 0,
        "dtype": "auto",
        "extra_args": [],
        "env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
        "cpu": {"kvcache_space_gib": 1},
    },
    "configurations": {
        "van": {"enabled": True},
        "suf": {"enabled": True, "k": 32, "cudagraph_mode": "PIECEWISE", "gpu_memory_utilization": 0.8},
        "kpad": {"k": [4, 8]},
        "nopad": {"k": [8]},
    },
}


def test_configurations_in_interleaving_order():
    cfgs = runs.configurations(CONFIG)
    assert [c.name for c in cfgs] == ["van", "suf", "kpad4", "kpad8", "nopad8"]
    assert [(c.method, c.k, c.pad) for c in cfgs] == [
        ("van", 0, False),
        ("suf", 32, False),
        ("kpad", 4, True),
        ("kpad", 8, True),
        ("nopad", 8, False),
    ]
    suf = cfgs[1]
    assert (suf.cudagraph_mode, suf.gpu_memory_utilization) == ("PIECEWISE", 0.8)
    assert (cfgs[2].cudagraph_mode, cfgs[2].gpu_memory_utilization) == ("FULL_AND_PIECEWISE", 0.85)


def test_duplicate_configuration_is_an_error():
    bad = {
        **CONFIG,
        "configurations": {
            "kpad": {"k": [4]},
            "nopad": {"k": []},
            "van": {"enabled": False},
            "suf": {"enabled": False},
        },
    }
    assert [c.name for c in runs.configurations(bad)] == ["kpad4"]
    bad["configurations"]["kpad"]["k"] = [4, 4]
    with pytest.raises(ValueError, match="duplicate names"):
        runs.configurations(bad)


def test_run_order_is_interleaved_by_repeat():
    cfgs = runs.configurations(CONFIG)[:3]
    assert runs.run_order(cfgs, 2) == [("van", 1), ("suf", 1), ("kpad4", 1), ("van", 2), ("suf", 2), ("kpad4", 2)]


def test_gpu_server_command_for_kpad():
    kpad8 = runs.configurations(CONFIG)[3]
    cmd = runs.server_command(
        model_path="/m",
        served_model_name="M",
        port=8123,
        configuration=kpad8,
        server=CONFIG["server"],
        tensor_parallel_size=2,
        device="cuda",
        cpus="0-3",
        python="py",
    )
    assert cmd == [
        "taskset",
        "-c",
        "0-3",
        "py",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/m",
        "--served-model-name",
        "M",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--max-model-len",
        "4096",
        "--tensor-parallel-size",
        "2",
        "--seed",
        "0",
        "--dtype",
        "auto",
        "--gpu-memory-utilization",
        "0.85",
        "--compilation-config",
        '{"cudagraph_mode": "FULL_AND_PIECEWISE"}',
        "--speculative-config",
        '{"method": "suffix", "num_speculative_tokens": 8}',
    ]


def test_cpu_van_server_command_is_eager_without_speculation_or_pinning():
    van = runs.configurations(CONFIG)[0]
    cmd = runs.server_command(
        model_path="/m",
        served_model_name="M",
        port=1,
        configuration=van,
        server=CONFIG["server"],
        tensor_parallel_size=1,
        device="cpu",
        cpus=None,
        python="py",
    )
    assert cmd[0] == "py" and "--enforce-eager" in cmd
    assert (
        "--speculative-config" not in cmd
        and "--compilation-config" not in cmd
        and "--gpu-memory-utilization" not in cmd
    )


def test_server_env_names_only_our_plugin_and_pads_only_kpad():
    cfgs = {c.name: c for c in runs.configurations(CONFIG)}
    base = {"PYTHONPATH": "/x", "VLLM_PLUGINS": "", "VLLM_SUFFIX_PAD_UNIFORM": "1"}
    kpad = runs.server_env(
        base, configuration=cfgs["kpad4"], server=CONFIG["server"], device="cpu", plugin_path="/p", vllm_port=9000
    )
    assert (kpad["VLLM_PLUGINS"], kpad["VLLM_SUFFIX_PAD_UNIFORM"], kpad["PYTHONPATH"]) == ("kpad", "1", "/p:/x")
    assert (kpad["ARCTIC_INFERENCE_ENABLED"], kpad["VLLM_CPU_KVCACHE_SPACE"], kpad["VLLM_PORT"]) == ("0", "1", "9000")
    assert kpad["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    nopad = runs.server_env(
        base, configuration=cfgs["nopad8"], server=CONFIG["server"], device="cuda", plugin_path="/p", vllm_port=9000
    )
    assert nopad["VLLM_SUFFIX_PAD_UNIFORM"] == "0" and "VLLM_CPU_KVCACHE_SPACE" not in nopad


def test_recorded_env_keeps_what_sets_the_run_not_what_differs_between_runs(tmp_path):
    cfgs = {c.name: c for c in runs.configurations(CONFIG)}
    base = {
        "PATH": "/bin",
        "HOME": "/root",
        "VLLM_WORKER_MULTIPROC_METHOD": "fork",
        "KPAD_AUTO_EXPLORE_EVERY": "8",
        "KPAD_WORKFLOW_COMMIT": "abc1234",  # a launch script's: differs between leases
        "KPAD_CONFIG": "config/gpu/auto.yaml",
        "VLLM_HOST_IP": "10.0.0.7",  # per node
        "VLLM_CACHE_ROOT": "/scratch/job42",  # per job
        "VLLM_API_KEY": "sk-secret",
    }
    configured = runs.configured_env(CONFIG["server"].get("env"), cfgs["kpad4"].env)
    recorded = [  # two runs of one setting: other plugin path, port, GPU and scratch folder
        runs.recorded_env(
            runs.server_env(
                base,
                configuration=cfgs["kpad4"],
                server=CONFIG["server"],
                device="cpu",
                plugin_path=plugin,
                vllm_port=port,
                cuda_visible_devices=[gpu],
                scratch_dir=str(tmp_path / scratch),
            ),
            configured,
        )
        for plugin, port, gpu, scratch in (("/p", 9000, "3", "run1"), ("/q", 9100, "5", "run2"))
    ]
    assert json.loads(recorded[0]) == {
        "ARCTIC_INFERENCE_ENABLED": "0",
        "KPAD_AUTO_EXPLORE_EVERY": "8",
        "VLLM_API_KEY": "<set>",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_PLUGINS": "kpad",
        "VLLM_SUFFIX_PAD_UNIFORM": "1",
        "VLLM_WORKER_MULTIPROC_METHOD": "fork",
    }
    assert recorded[1] == recorded[0]


def test_bench_command_never_repeats_prompts_and_streams_chat():
    cmd = runs.bench_command(
        base_url="http://127.0.0.1:1",
        served_model_name="M",
        tokenizer="/m",
        dataset_path="/d.jsonl",
        num_prompts=16,
        load={"max_tokens": 128, "max_concurrency": 8, "temperature": 0},
        seed=0,
        result_dir="/r",
        result_filename="b.json",
        cpus="1",
        python="py",
    )
    assert cmd[:6] == ["taskset", "-c", "1", "py", "-m", "kpadstudy.vllm_bench"]
    for flag in ("--no-oversample", "--disable-shuffle", "--skip-chat-template", "--save-result"):
        assert flag in cmd
    assert "--no-stream" not in cmd
    pairs = dict(zip(cmd[6::2], cmd[7::2], strict=False))
    assert pairs["--backend"] == "openai-chat" and pairs["--endpoint"] == "/v1/chat/completions"
    assert cmd[cmd.index("--num-prompts") + 1] == "16" and cmd[cmd.index("--custom-output-len") + 1] == "128"
    assert cmd[cmd.index("--max-concurrency") + 1] == "8" and cmd[cmd.index("--temperature") + 1] == "0"
    # no readiness probe: it would send the first measured prompt once more (pinned, though 0 is vLLM's default)
    assert cmd[cmd.index("--ready-check-timeout-sec") + 1] == "0" and "--num-warmups" not in cmd


def test_warmup_args():
    assert runs.warmup_args("/w.jsonl", 4) == ["--warmup-dataset-path", "/w.jsonl", "--warmup-num-prompts", "4"]


def test_describe_flattens_configuration():
    d = runs.describe(runs.configurations(CONFIG)[2])
    assert d == {
        "configuration": "kpad4",
        "method": "kpad",
        "k": 4,
        "pad": True,
        "cudagraph_mode": "FULL_AND_PIECEWISE",
        "gpu_memory_utilization": 0.85,
        "speculative_options": "{}",
        "server_args": "{}",
        "capture_sizing": True,
        "lengths": "",
        "env": "{}",
        "control": False,
    }
    json.dumps(d)


def test_workflow_commit_prefers_the_variable_then_git(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # git must not find a repository above tmp_path
    assert runs.workflow_commit(str(tmp_path), {"KPAD_WORKFLOW_COMMIT": "abc123"}) == "abc123"
    assert runs.workflow_commit(str(tmp_path), {}) is None  # not a repository
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "f").write_text("1")
    git = ["git", "-C", str(tmp_path), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "add", "f"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert runs.workflow_commit(str(tmp_path), {}) == sha
    (tmp_path / "f").write_text("2")
    assert runs.workflow_commit(str(tmp_path), {}) == sha + "-dirty"


def test_run_order_is_shuffled_per_repeat_with_its_seed():
    configs = runs.configurations(
        {**CONFIG, "configurations": [{"method": "van"}, {"method": "kpad", "k": [4, 8, 12]}]}
    )
    plain = runs.run_order(configs, 2, None)
    assert plain == [(n, r) for r in (1, 2) for n in ("van", "kpad4", "kpad8", "kpad12")]
    shuffled = runs.run_order(configs, 3, 0)
    # random.Random("0/1"), ("0/2"), ("0/3").shuffle of the config order: the same for everyone with seed 0
    assert [n for n, r in shuffled if r == 1] == ["van", "kpad4", "kpad8", "kpad12"]
    assert [n for n, r in shuffled if r == 2] == ["kpad4", "van", "kpad12", "kpad8"]
    assert [n for n, r in shuffled if r == 3] == ["kpad12", "kpad8", "van", "kpad4"]
    assert [r for _, r in shuffled] == [1] * 4 + [2] * 4 + [3] * 4  # repeats stay blocks, in order
    assert runs.run_order(configs, 3, 0) == shuffled and runs.run_order(configs, 3, 1) != shuffled
    cfg = {**CONFIG, "configurations": [{"method": "van"}, {"method": "kpad", "k": [4, 8, 12]}], "repeats": 3}
    assert runs.position({**cfg, "order_seed": 0}, "van", 3) == 3 and runs.position(cfg, "van", 3) == 1


def test_a_configuration_env_reaches_its_own_server_only_and_never_sets_the_pipelines_variables():
    server = {"cudagraph_mode": "FULL_AND_PIECEWISE", "gpu_memory_utilization": 0.9, "env": {"A": "server"}}
    entries = [
        {"name": "vansyncv1", "method": "van", "env": {"VLLM_USE_V2_MODEL_RUNNER": 0, "A": "entry"}},
        {"method": "van"},
    ]
    v1, van = runs.configurations({"server": server, "configurations": entries})
    assert v1.env == {"VLLM_USE_V2_MODEL_RUNNER": "0", "A": "entry"}
    assert runs.describe(v1)["env"] == '{"A": "entry", "VLLM_USE_V2_MODEL_RUNNER": "0"}'

    def env(configuration):
        return runs.server_env(
            {}, configuration=configuration, server=server, device="cuda", plugin_path="/p", vllm_port=1
        )

    assert (env(v1)["VLLM_USE_V2_MODEL_RUNNER"], env(v1)["A"]) == ("0", "entry")  # the entry's value over server.env
    assert "VLLM_USE_V2_MODEL_RUNNER" not in env(van) and env(van)["A"] == "server"
    bad = {"server": server, "configurations": [{"method": "kpad", "k": 8, "env": {"VLLM_SUFFIX_PAD_UNIFORM": "0"}}]}
    with pytest.raises(
        ValueError, match=r"configurations\[0\]: env sets \['VLLM_SUFFIX_PAD_UNIFORM'\], which the pipeline"
    ):
        runs.configurations(bad)


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            {"method": "van", "env": {"KPAD_AUTO_SKIP_SPECULATION": 0}},
            r"configurations\[0\]: env sets \['KPAD_AUTO_SKIP_SPECULATION'\], which only method kpadauto reads "
            r"\(this entry is van\)",
        ),
        (
            {"method": "kpadauto", "k": 8, "env": {"KPAD_AUTO_SKIP_SPECULATION": "yes"}},
            r"configurations\[0\] \(kpadauto8\): env KPAD_AUTO_SKIP_SPECULATION='yes': "
            r"give 1 \(skip, the default\) or 0",
        ),
        (
            {"method": "kpadauto", "k": 8, "env": {"KPAD_AUTO_CHECK_DEFERRED": 2}},
            r"configurations\[0\] \(kpadauto8\): env KPAD_AUTO_CHECK_DEFERRED='2': "
            r"give 1 \(check\) or 0 \(the default\)",
        ),
        (
            {"method": "kpadauto", "k": 8, "env": {"KPAD_AUTO_UNPADDED": "yes"}},
            r"configurations\[0\] \(kpadauto8\): env KPAD_AUTO_UNPADDED='yes': "
            r"give 1 \(a step may run unpadded\) or 0 \(the default\)",
        ),
        (
            {"method": "kpadauto", "k": 8, "env": {"KPAD_AUTO_CHECK_DEFERRED": 1, "KPAD_AUTO_SKIP_SPECULATION": 0}},
            r"configurations\[0\] \(kpadauto8\): env KPAD_AUTO_CHECK_DEFERRED=1 checks the tree updates that "
            r"skipped steps defer, "
            r"and KPAD_AUTO_SKIP_SPECULATION=0 skips none: drop one of them",
        ),
        (
            {"method": "kpadauto", "k": 8, "env": {"KPAD_AUTO_COST_REPEATS": 0}},
            r"configurations\[0\] \(kpadauto8\): env KPAD_AUTO_COST_REPEATS='0': give an integer >= 1 \(default 3\)",
        ),
    ],
)
def test_kpadauto_settings_in_env_are_checked_before_any_server(entry, message):
    server = {"cudagraph_mode": "FULL_AND_PIECEWISE", "gpu_memory_utilization": 0.9}
    with pytest.raises(ValueError, match=message):
        runs.configurations({"server": server, "configurations": [entry]})


def test_kpadauto_settings_in_server_env_are_checked_with_the_entrys_env_on_top():
    server = {"cudagraph_mode": "FULL_AND_PIECEWISE", "gpu_memory_utilization": 0.9}
    van = {"method": "van"}
    kpadauto = {"method": "kpadauto", "k": 8}
    bad_repeats = {**server, "env": {"KPAD_AUTO_COST_REPEATS": "three"}}
    assert [c.name for c in runs.configurations({"server": bad_repeats, "configurations": [van]})] == ["van"]
    with pytest.raises(
        ValueError,
        match=r"^configurations\[1\] \(kpadauto8\): config server.env KPAD_AUTO_COST_REPEATS='three': give an integer",
    ):
        runs.configurations({"server": bad_repeats, "configurations": [van, kpadauto]})
    check_on = {**server, "env": {"KPAD_AUTO_CHECK_DEFERRED": "1"}}
    with pytest.raises(
        ValueError,
        match=r"^configurations\[0\] \(kpadauto8\): config server.env KPAD_AUTO_CHECK_DEFERRED=1 checks the tree",
    ):
        runs.configurations(
            {"server": check_on, "configurations": [{**kpadauto, "env": {"KPAD_AUTO_SKIP_SPECULATION": 0}}]}
        )
    fixed = {**kpadauto, "env": {"KPAD_AUTO_CHECK_DEFERRED": 0, "KPAD_AUTO_SKIP_SPECULATION": 0}}
    (cfg,) = runs.configurations({"server": check_on, "configurations": [fixed]})  # the entry's value wins
    assert cfg.env == {"KPAD_AUTO_CHECK_DEFERRED": "0", "KPAD_AUTO_SKIP_SPECULATION": "0"}
    # read as the plugin reads them: spaces stripped, empty = the default
    lenient = {**server, "env": {"KPAD_AUTO_SKIP_SPECULATION": "", "KPAD_AUTO_CHECK_DEFERRED": " 1"}}
    assert [c.name for c in runs.configurations({"server": lenient, "configurations": [kpadauto]})] == ["kpadauto8"]
    # one step-cost table cannot serve a list of k: the message names the configuration it failed for
    costs = '{"0": [[1, 0.001]], "2": [[1, 0.002]], "4": [[1, 0.004]], "8": [[1, 0.008]]}'
    listed = {"method": "kpadauto", "k": [8, 12], "env": {"KPAD_AUTO_STEP_COSTS": costs}}
    with pytest.raises(ValueError, match=r"^configurations\[0\] \(kpadauto12\): env KPAD_AUTO_STEP_COSTS: lengths"):
        runs.configurations({"server": server, "configurations": [listed]})


def test_the_deferred_check_is_refused_before_any_run_where_no_step_can_be_skipped():
    server = {"cudagraph_mode": "FULL_AND_PIECEWISE", "gpu_memory_utilization": 0.9}
    check = {"method": "kpadauto", "k": 8, "env": {"KPAD_AUTO_CHECK_DEFERRED": 1}}
    models = {"small": {"tensor_parallel_size": 1}, "big": {"tensor_parallel_size": 2}}
    config = {"server": server, "models": models, "configurations": [check]}
    with pytest.raises(
        ValueError,
        match=r"^configuration kpadauto8: KPAD_AUTO_CHECK_DEFERRED=1 would check nothing: models \['big'\] run at "
        r"tensor parallel size > 1 puts the workers outside the scheduler's process",
    ):
        runs.configurations(config)
    mp = {**check, "server_args": {"distributed_executor_backend": "mp"}}
    with pytest.raises(ValueError, match=r"^configuration kpadauto8: .* distributed_executor_backend mp puts"):
        runs.configurations({**config, "models": {"small": {}}, "configurations": [mp]})
    plain = {"method": "kpadauto", "k": 8}  # no check: the skip is only turned off, and the server says so
    assert [c.name for c in runs.configurations({**config, "configurations": [plain]})] == ["kpadauto8"]


def test_env_booleans_become_1_and_0_and_server_env_may_not_set_the_pipelines_variables():
    server = {"cudagraph_mode": "FULL_AND_PIECEWISE", "gpu_memory_utilization": 0.9}
    entry = {
        "method": "kpadauto",
        "k": 8,
        "env": {"KPAD_AUTO_SKIP_SPECULATION": False, "VLLM_USE_V2_MODEL_RUNNER": True},
    }
    (cfg,) = runs.configurations({"server": server, "configurations": [entry]})
    assert cfg.env == {"KPAD_AUTO_SKIP_SPECULATION": "0", "VLLM_USE_V2_MODEL_RUNNER": "1"}
    bad = {"server": {**server, "env": {"VLLM_PLUGINS": ""}}, "configurations": [{"method": "van"}]}
    with pytest.raises(ValueError, match=r"config server.env sets \['VLLM_PLUGINS'\], which the pipeline sets itself"):
        runs.configurations(bad)
