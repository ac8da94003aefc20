"""Sharing one machine: GPU slots, port blocks, CPU lists; boot-failure classes and retries; stopping a process
group."""

import contextlib
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kpadstudy import boot, cpus, gpus, ports, runs, server
from kpadstudy.server import group_alive, stop

ROOT = Path(__file__).resolve().parent.parent

# --- GPU slots -------------------------------------------------------------------------------------


def _hold_gpus(n, lock_dir, hold_s, queue):
    with gpus.allocated_gpus(n, [str(i) for i in range(8)], lock_dir, timeout_s=60, poll_s=0.05) as got:
        start = time.monotonic()
        queue.put((n, tuple(got), "start", time.time()))
        time.sleep(hold_s - (time.monotonic() - start))
        queue.put((n, tuple(got), "end", time.time()))


def test_concurrent_gpu_jobs_never_share_a_gpu(tmp_path):
    """8 fake GPUs, 9 jobs needing 1, 2 or 4 (25 GPUs in all) at once: at no moment does a GPU have two holders."""
    needs = [4, 2, 1, 1, 2, 4, 1, 4, 2]
    q = mp.get_context("fork").Queue()
    procs = [mp.get_context("fork").Process(target=_hold_gpus, args=(n, str(tmp_path), 0.4, q)) for n in needs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * len(needs)
    events = sorted((q.get() for _ in range(2 * len(needs))), key=lambda e: (e[3], e[2] == "start"))
    holders: dict[str, int] = {}
    peak = 0
    for n, got, kind, _ in events:
        assert len(got) == n and len(set(got)) == n
        for g in got:
            holders[g] = holders.get(g, 0) + (1 if kind == "start" else -1)
            assert holders[g] in (0, 1), f"GPU {g} held twice"
        peak = max(peak, sum(holders.values()))
    assert peak <= 8 and sum(holders.values()) == 0


def test_gpu_allocation_takes_the_lowest_free_and_releases(tmp_path):
    visible = [str(i) for i in range(8)]
    with gpus.allocated_gpus(2, visible, str(tmp_path)) as a, gpus.allocated_gpus(4, visible, str(tmp_path)) as b:
        assert (a, b) == (["0", "1"], ["2", "3", "4", "5"])
        with pytest.raises(
            TimeoutError, match=r"^4 GPUs not free within 0 s: busy \['0', '1', '2', '3', '4', '5'\] of"
        ):
            with gpus.allocated_gpus(4, visible, str(tmp_path), timeout_s=0, poll_s=0.01):
                pass
    with gpus.allocated_gpus(8, visible, str(tmp_path)) as c:
        assert c == visible
    with gpus.allocated_gpus(0, visible, str(tmp_path)) as none:
        assert none == []
    with pytest.raises(ValueError, match=r"a run needs 9 GPUs \(tensor_parallel_size\) but the node offers 8"):
        with gpus.allocated_gpus(9, visible, str(tmp_path)):
            pass


def test_visible_gpus_from_config_or_environment():
    assert gpus.visible_gpus(3, env={}) == ["0", "1", "2"]
    assert gpus.visible_gpus([4, 6], env={}) == ["4", "6"]
    assert gpus.visible_gpus(None, env={"CUDA_VISIBLE_DEVICES": "2, 5,7"}) == ["2", "5", "7"]
    assert gpus.visible_gpus(None, env={"CUDA_VISIBLE_DEVICES": ""}) == []


# --- ports -----------------------------------------------------------------------------------------

LINUX_EPHEMERAL = (32768, 60999)  # Linux's default ip_local_port_range


def _hold_block(lock_dir, start, queue, hold_s):
    with ports.port_block(lock_dir, (21000, 21000 + 64 * 4 - 1), start=start, ephemeral=LINUX_EPHEMERAL) as b:
        queue.put(b.first)
        time.sleep(hold_s)


def test_concurrent_port_blocks_are_distinct(tmp_path):
    """4 processes asking at once, all starting at the same block, get the 4 blocks of the range; a 5th finds none."""
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_hold_block, args=(str(tmp_path), 0, q, 1.5)) for _ in range(4)]
    for p in procs:
        p.start()
    firsts = sorted(q.get(timeout=30) for _ in procs)
    assert firsts == [21000, 21064, 21128, 21192]
    with pytest.raises(RuntimeError) as err:
        with ports.port_block(str(tmp_path), (21000, 21255), start=0, ephemeral=LINUX_EPHEMERAL):
            pass
    assert str(err.value) == (
        "no free block of 64 ports in node.port_range 21000-21255 outside the kernel's ephemeral ports 32768-60999 "
        f"(/proc/sys/net/ipv4/ip_local_port_range): all 4 are locked or in use (locks under {tmp_path})"
    )
    for p in procs:
        p.join(30)


def test_port_block_skips_ports_in_use_and_names_vllm_base(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 22001))  # the second port of the first block: another program's
        s.listen()
        with ports.port_block(str(tmp_path), (22000, 22000 + 64 * 2 - 1), start=0, ephemeral=LINUX_EPHEMERAL) as b:
            assert (b.api, b.vllm_base) == (22064, 22065)
            assert ports.bindable(22064)  # locked by us, not bound: the server binds it


def test_no_port_block_overlaps_the_ephemeral_range():
    """Default range 20000-65535 with Linux's 32768-60999: 199 blocks below (20000 ... 32672, the last ending
    at 32735), 70 above (61024 ... 65440, the last ending at 65503)."""
    firsts = ports.usable_blocks(ports.PORT_RANGE, LINUX_EPHEMERAL)
    assert (len(firsts), firsts[:2], firsts[198:200], firsts[-1]) == (269, [20000, 20064], [32672, 61024], 65440)
    assert ports.usable_blocks((32700, 33000), LINUX_EPHEMERAL) == [32700]  # 32700-32763: just below
    assert ports.usable_blocks((32720, 33000), LINUX_EPHEMERAL) == []  # 32720-32783 overlaps 32768
    kernel = ports.ephemeral_range()  # this machine's own range
    for first in ports.usable_blocks(ports.PORT_RANGE, kernel):
        assert first + 63 < kernel[0] or first > kernel[1], (first, kernel)


def test_a_port_range_inside_the_ephemeral_range_is_refused_with_what_to_change(tmp_path):
    with pytest.raises(RuntimeError) as err:
        with ports.port_block(str(tmp_path), (40000, 41000), ephemeral=LINUX_EPHEMERAL):
            pass
    assert str(err.value) == (
        "no block of 64 ports fits in node.port_range 40000-41000 outside the kernel's ephemeral ports 32768-60999 "
        "(/proc/sys/net/ipv4/ip_local_port_range): widen node.port_range below 32768 or above 60999"
    )


def test_a_reversed_or_narrow_port_range_is_refused(tmp_path):
    for bad in ((41000, 40000), (20000, 20062)):
        with pytest.raises(
            ValueError, match=rf"^node.port_range \[{bad[0]}, {bad[1]}\] holds fewer than 64 ports: give"
        ):
            with ports.port_block(str(tmp_path), bad, ephemeral=LINUX_EPHEMERAL):
                pass


def test_ephemeral_range_is_read_from_the_kernels_file(tmp_path):
    f = tmp_path / "ip_local_port_range"
    f.write_text("32768\t60999\n")
    assert ports.ephemeral_range(str(f)) == (32768, 60999)
    f.write_text("32768\n")
    with pytest.raises(
        ValueError, match=r"ip_local_port_range: expected two port numbers \(first last\), got '32768'$"
    ):
        ports.ephemeral_range(str(f))


# --- the /health probe -----------------------------------------------------------------------------


@contextlib.contextmanager
def _tcp_server(answer):
    """A one-thread TCP server on a free port: for each connection, read the request, send ``answer(request)``,
    close."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.2)
    stop_event = threading.Event()

    def serve():
        while not stop_event.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                request = conn.recv(4096)
                conn.sendall(answer(request))

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop_event.set()
        t.join(5)
        srv.close()


def test_probe_answers_false_when_the_answer_is_not_http():
    """A "server" that echoes the request back (what a TCP self-connect reads): urllib raised BadStatusLine here."""
    with _tcp_server(lambda request: request) as url:
        assert server.is_healthy(url) is False
    with _tcp_server(lambda request: b"\x00\x01 garbage\r\n\r\n") as url:
        assert server.is_healthy(url) is False
    with _tcp_server(lambda request: b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n") as url:
        assert server.is_healthy(url) is False
    with _tcp_server(lambda request: b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") as url:
        assert server.is_healthy(url) is True


def test_probe_answers_false_on_a_self_connection():
    """Bind the probe's socket to the port it polls while nothing listens there: it connects to itself."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert server.is_healthy(f"http://127.0.0.1:{port}", source_address=("127.0.0.1", port)) is False
    assert server.is_healthy(f"http://127.0.0.1:{port}") is False  # refused


# --- CPU lists -------------------------------------------------------------------------------------


def test_cpu_lists_parse_and_format():
    assert cpus.parse_cpu_list("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}
    assert cpus.format_cpu_set({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    with pytest.raises(ValueError, match=r"CPU list '0-x': '0-x' is not N or A-B"):
        cpus.parse_cpu_list("0-x")
    assert cpus.pinned_cpu_count({"server": "0-47,56-103", "client": "48-55"}) == 104
    assert cpus.pinned_cpu_count({"server": None, "client": None}) == 0


def test_cpu_list_outside_the_allowed_set_is_an_error_naming_both():
    with pytest.raises(ValueError) as err:
        cpus.check_pinning({"server": "0-47,56-103", "client": "48-55"}, allowed={0, 1})
    assert str(err.value) == (
        "taskset.server '0-47,56-103' names CPUs 2-47,56-103 outside this job's allowed CPUs 0-1 "
        "(os.sched_getaffinity); set taskset.server inside them"
    )
    with pytest.raises(ValueError, match=r"^taskset.client '2' names CPUs 2 outside this job's allowed CPUs 0-1"):
        cpus.check_pinning({"server": "0", "client": "2"}, allowed={0, 1})
    cpus.check_pinning({"server": "0", "client": "1"}, allowed={0, 1})  # inside: no error


SLOTS = {"slots": [{"server": "0", "client": "0"}, {"server": "1", "client": "1"}]}


def test_cpu_slots_are_disjoint_and_checked_by_name():
    assert cpus.slots({"server": "0", "client": "1"}) == [{"server": "0", "client": "1"}]
    assert cpus.slots(SLOTS) == SLOTS["slots"] and cpus.pinned_cpu_count(SLOTS) == 1
    assert cpus.pinned_cpu_count({"slots": [{"server": "0-2", "client": "3"}, {"server": "4", "client": "5"}]}) == 4
    with pytest.raises(ValueError) as err:
        cpus.slots({"slots": [{"server": "0-3", "client": "4"}, {"server": "5", "client": "4"}]})
    assert str(err.value) == (
        "taskset.slots[0] and taskset.slots[1] share CPUs 4: runs side by side would measure each other; "
        "make the slots disjoint"
    )
    with pytest.raises(
        ValueError, match=r"^taskset: give either server / client \(one slot\) or slots \(several\), not both$"
    ):
        cpus.slots({"server": "0", "client": None, **SLOTS})
    with pytest.raises(
        ValueError,
        match=(
            r"^taskset.slots\[1\].server '1' names CPUs 1 "
            r"outside this job's allowed CPUs 0 .*set taskset.slots\[1\].server"
        ),
    ):
        cpus.check_pinning(SLOTS, allowed={0})


def _hold_slot(lock_dir, taskset, hold_s, queue):
    with cpus.allocated_slot(taskset, lock_dir, timeout_s=60, poll_s=0.05) as (index, slot):
        queue.put((tuple(sorted(cpus.slot_cpus(slot))), "start", time.time()))
        time.sleep(hold_s)
        queue.put((tuple(sorted(cpus.slot_cpus(slot))), "end", time.time()))


def test_runs_side_by_side_never_share_a_cpu(tmp_path):
    """6 jobs of two studies at once on CPUs 0-3: study A has slots {0,1} and {2,3}, study B slots {1,2} and {3}.
    At no moment does a CPU have two holders."""
    a = {"slots": [{"server": "0", "client": "1"}, {"server": "2", "client": "3"}]}
    b = {"slots": [{"server": "1-2", "client": None}, {"server": "3", "client": "3"}]}
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_hold_slot, args=(str(tmp_path), t, 0.3, q)) for t in (a, b, a, b, a, b)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * 6
    events = sorted((q.get() for _ in range(12)), key=lambda e: (e[2], e[1] == "start"))
    holders: dict[int, int] = {}
    for got, kind, _ in events:
        for c in got:
            holders[c] = holders.get(c, 0) + (1 if kind == "start" else -1)
            assert holders[c] in (0, 1), f"CPU {c} held twice"
    with cpus.allocated_slot(a, str(tmp_path)) as first, cpus.allocated_slot(a, str(tmp_path)) as second:
        assert (first[0], second[0]) == (0, 1)
        with pytest.raises(
            TimeoutError, match=r"^no CPU slot of taskset free within 0 s: each has CPUs held by other runs"
        ):
            with cpus.allocated_slot(a, str(tmp_path), timeout_s=0, poll_s=0.01):
                pass
    with cpus.allocated_slot({"server": None, "client": None}, str(tmp_path)) as (index, slot):
        assert (index, slot) == (0, {"server": None, "client": None})  # nothing pinned: nothing locked


def test_auto_split_gives_the_client_the_last_cpus_and_shares_a_single_cpu():
    assert cpus.split_roles({0}) == {"server": "0", "client": "0", "shared": True}
    assert cpus.split_roles({0, 1}) == {"server": "0", "client": "1", "shared": False}
    assert cpus.split_roles(set(range(16))) == {"server": "0-11", "client": "12-15", "shared": False}
    assert cpus.split_roles(set(range(112))) == {"server": "0-107", "client": "108-111", "shared": False}
    assert cpus.split_roles({4, 5, 6}, client_cpus=5) == {"server": "4", "client": "5-6", "shared": False}
    with pytest.raises(ValueError, match="no CPUs to split"):
        cpus.split_roles(set())


def test_auto_gpu_cpu_sets_follow_numa_else_split_evenly():
    """8 GPUs, 112 CPUs, GPUs 0-3 on NUMA node 0 (CPUs 0-55), 4-7 on node 1 (56-111): 14 CPUs each, in
    index order, disjoint; a job granted only CPUs 0-27 and 56-83 halves each share (7 each)."""
    numa = {str(g): set(range(56)) if g < 4 else set(range(56, 112)) for g in range(8)}
    gpu_ids = [str(g) for g in range(8)]
    sets, shared = cpus.gpu_cpu_sets(set(range(112)), gpu_ids, numa)
    assert not shared
    assert {g: cpus.format_cpu_set(c) for g, c in sets.items()} == {
        "0": "0-13", "1": "14-27", "2": "28-41", "3": "42-55",
        "4": "56-69", "5": "70-83", "6": "84-97", "7": "98-111",
    }  # fmt: skip
    granted = set(range(28)) | set(range(56, 84))
    sets, _ = cpus.gpu_cpu_sets(granted, gpu_ids, numa)
    assert cpus.format_cpu_set(sets["3"]) == "21-27" and cpus.format_cpu_set(sets["4"]) == "56-62"
    # no NUMA answer, or NUMA sets that overlap: an even split of what is allowed
    sets, _ = cpus.gpu_cpu_sets(set(range(6)), ["0", "1", "2"])
    assert [cpus.format_cpu_set(sets[g]) for g in "012"] == ["0-1", "2-3", "4-5"]
    sets, _ = cpus.gpu_cpu_sets(set(range(4)), ["0", "1"], {"0": {0, 1, 2}, "1": {2, 3}})
    assert [cpus.format_cpu_set(sets[g]) for g in "01"] == ["0-1", "2-3"]
    # fewer CPUs than GPUs: said, not hidden, and spread evenly
    sets, shared = cpus.gpu_cpu_sets({0}, ["0", "1"])
    assert (sets, shared) == ({"0": {0}, "1": {0}}, True)
    sets, shared = cpus.gpu_cpu_sets({0, 1}, ["0", "1", "2", "3"])
    assert (sets, shared) == ({"0": {0}, "1": {0}, "2": {1}, "3": {1}}, True)
    # a NUMA node with fewer CPUs than its GPUs, while the job has enough: the even split, nothing shared
    sets, shared = cpus.gpu_cpu_sets({0, 1, 2, 3}, ["0", "1", "2"], {"0": {0}, "1": {0}, "2": {1, 2, 3}})
    assert (sets, shared) == ({"0": {0}, "1": {1}, "2": {2, 3}}, False)
    with pytest.raises(ValueError, match=r"taskset.client_cpus must be a whole number >= 1, got 0"):
        cpus.split_roles({0, 1}, client_cpus=0)


def test_auto_runs_on_fake_gpus_take_their_gpus_cpus_and_a_cell_keeps_its_gpu(tmp_path):
    """taskset auto, 2 fake GPUs, CPUs 0-7 allowed: two runs at once hold one GPU each and disjoint CPUs
    (0-3 and 4-7, client on the last one); a CPU run takes every allowed CPU; explicit lists win over auto."""
    node = {"lock_dir": str(tmp_path), "gpus": 2}
    allowed = set(range(8))
    auto = {"auto": True}
    with (
        cpus.allocated(auto, 1, node, prefer="m/a", allowed=allowed, numa={}) as first,
        cpus.allocated(auto, 1, node, prefer="m/a", allowed=allowed, numa={}) as second,
    ):
        got = sorted([first, second], key=lambda x: x[2])
        assert got == [
            (0, {"server": "0-2", "client": "3", "shared": False}, ["0"]),
            (1, {"server": "4-6", "client": "7", "shared": False}, ["1"]),
        ]
    # a cell's runs look first at the same GPU (its hash over the slots), one after another
    start = cpus.preferred_start("m/a", 2, 1)
    for _ in range(3):
        with cpus.allocated(auto, 1, node, prefer="m/a", allowed=allowed, numa={}) as (index, _, gpu_ids):
            assert (index, gpu_ids) == (start, [str(start)])
    with cpus.allocated(auto, 2, node, allowed=allowed, numa={}) as (index, slot, gpu_ids):
        assert (index, slot["server"], slot["client"], gpu_ids) == (0, "0-5", "6-7", ["0", "1"])
    with cpus.allocated(auto, 0, node, allowed={3}) as (index, slot, gpu_ids):
        assert (index, slot, gpu_ids) == (0, {"server": "3", "client": "3", "shared": True}, [])
    explicit = {"auto": True, "server": "1", "client": "2"}
    assert not cpus.is_auto(explicit) and cpus.is_auto("auto")
    with cpus.allocated(explicit, 0, node, allowed=allowed) as (_, slot, _):
        assert slot == {"server": "1", "client": "2", "shared": False}


def test_process_cpus_reads_what_the_kernel_granted():
    p = subprocess.Popen(["taskset", "-c", "0", "sleep", "5"])
    try:
        time.sleep(0.3)
        assert cpus.process_cpus(p.pid) == "0"
    finally:
        p.kill()
        p.wait()
    assert cpus.process_cpus(p.pid) is None


def test_run_refuses_pinning_outside_the_job_before_any_server(tmp_path):
    from kpadstudy.execute import execute_run

    cfg = {
        "configurations": {"van": {"enabled": True}, "suf": {"enabled": False}, "kpad": {"k": []}, "nopad": {"k": []}},
        "server": {"cudagraph_mode": "FULL", "gpu_memory_utilization": 0.8},
        "taskset": {"server": "0-3", "client": None},
    }
    with pytest.raises(ValueError, match=r"^taskset.server '0-3' names CPUs 3 outside this job's allowed CPUs 0-2"):
        execute_run(
            config=cfg,
            model="m",
            model_path="/m",
            corpus_path="/c",
            corpus="c",
            configuration=runs.configuration(cfg, "van"),
            repeat=1,
            out_json=tmp_path / "r.json",
            log_dir=tmp_path,
            plugin_path="/p",
            allowed_cpus={0, 1, 2},
        )
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "server.log").exists()


# --- server environment ----------------------------------------------------------------------------


def test_server_env_sets_the_runs_gpus_and_passes_the_nodes_variables():
    van = runs.Configuration("van", "van", 0, False, "FULL", 0.85)
    base = {"NCCL_IB_HCA": "mlx5_0", "NCCL_SOCKET_IFNAME": "eth0", "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
    env = runs.server_env(
        base,
        configuration=van,
        server={"env": {"NCCL_DEBUG": "WARN"}},
        device="cuda",
        plugin_path="/p",
        vllm_port=20001,
        cuda_visible_devices=["4", "5"],
    )
    assert (
        env["CUDA_VISIBLE_DEVICES"],
        env["NCCL_IB_HCA"],
        env["NCCL_SOCKET_IFNAME"],
        env["NCCL_DEBUG"],
        env["VLLM_PORT"],
    ) == ("4,5", "mlx5_0", "eth0", "WARN", "20001")
    cpu_env = runs.server_env(
        base, configuration=van, server={"cpu": {"kvcache_space_gib": 1}}, device="cpu", plugin_path="/p", vllm_port=1
    )
    assert cpu_env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"  # None: left as it is
    assert "VLLM_RPC_BASE_PATH" not in env and "TMPDIR" not in cpu_env


def test_server_temporary_files_go_to_the_runs_scratch_folder():
    """vLLM's IPC sockets always; on CPU every temporary file (its vllm_dist_* files); on a GPU TMPDIR stays (compile
    caches)."""
    van = runs.Configuration("van", "van", 0, False, "FULL", 0.85)
    base = {"TMPDIR": "/scratch/node"}
    gpu = runs.server_env(
        base, configuration=van, server={}, device="cuda", plugin_path="/p", vllm_port=1, scratch_dir="/scratch/run1"
    )
    cpu = runs.server_env(
        base,
        configuration=van,
        server={"cpu": {"kvcache_space_gib": 1}},
        device="cpu",
        plugin_path="/p",
        vllm_port=1,
        scratch_dir="/scratch/run1",
    )
    assert (gpu["VLLM_RPC_BASE_PATH"], gpu["TMPDIR"]) == ("/scratch/run1", "/scratch/node")
    assert (cpu["VLLM_RPC_BASE_PATH"], cpu["TMPDIR"]) == ("/scratch/run1", "/scratch/run1")


# --- boot failures ---------------------------------------------------------------------------------

KV_032 = (
    "(EngineCore pid=4242) ValueError: To serve at least one request with the model's max seq len (65536), "
    "(1.41 GiB KV cache is needed, which is larger than the available KV cache memory (1.00 GiB). "
    "Based on the available memory, the estimated maximum model length is 46592."
)


@pytest.mark.parametrize(
    "log, exit_code, timed_out, reason, evidence",
    [
        (
            "INFO loading\n" + KV_032 + "\nRuntimeError: Engine core initialization failed.",
            1,
            False,
            "no_kv_cache",
            KV_032,
        ),
        (
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
            1,
            False,
            "no_kv_cache",
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
        ),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
            1,
            False,
            "oom",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        ),
        (
            "kpad_plugin.UnsupportedVllmError: K-pad plugin: vLLM 0.27.0 is not supported (supported: 0.26.0, 0.32.0).",
            1,
            False,
            "unsupported",
            "kpad_plugin.UnsupportedVllmError: K-pad plugin: vLLM 0.27.0 is not supported (supported: 0.26.0, 0.32.0).",
        ),
        (
            "INFO loading weights\n",
            None,
            True,
            "timeout",
            "not healthy within server.boot_timeout_s; the process was still running",
        ),
        ("Segmentation fault\n", -11, False, "crash", "exited with code -11 and no known cause in its log"),
    ],
)
def test_boot_failure_classes(log, exit_code, timed_out, reason, evidence):
    assert boot.classify_boot_failure(log, exit_code, timed_out) == (reason, evidence)


CFG = {
    "server": {
        "max_model_len": 4096,
        "max_num_seqs": None,
        "gpu_memory_utilization": 0.85,
        "cpu": {"kvcache_space_gib": 2},
    }
}


def test_retry_settings_per_attempt():
    retry = {
        "attempts": 3,
        "adjust": {
            "no_kv_cache": {"max_model_len": 0.5},
            "oom": {"gpu_memory_utilization": 0.9, "kvcache_space_gib": 0.5},
        },
    }
    first = {"max_model_len": 4096, "max_num_seqs": None, "gpu_memory_utilization": 0.85, "kvcache_space_gib": 2}
    assert boot.attempt_settings(CFG, retry, []) == first
    assert boot.attempt_settings(CFG, retry, ["no_kv_cache"]) == {**first, "max_model_len": 2048}
    assert boot.attempt_settings(CFG, retry, ["no_kv_cache", "oom"]) == {
        **first,
        "max_model_len": 2048,
        "gpu_memory_utilization": 0.765,
        "kvcache_space_gib": 1,
    }
    assert boot.attempt_settings(CFG, retry, ["no_kv_cache", "no_kv_cache", "no_kv_cache"]) is None  # attempts used up
    assert boot.attempt_settings(CFG, retry, ["crash"]) is None  # no adjustment for crash: no retry
    assert boot.attempt_settings(CFG, {"attempts": 1}, []) == first
    with pytest.raises(
        ValueError, match=r"server.retry.adjust.no_kv_cache.max_num_seqs: server max_num_seqs is not set in the config"
    ):
        boot.attempt_settings(CFG, {"attempts": 2, "adjust": {"no_kv_cache": {"max_num_seqs": 0.5}}}, ["no_kv_cache"])
    applied = boot.apply_settings(CFG, {**first, "max_model_len": 2048, "kvcache_space_gib": 1})
    assert (
        applied["server"]["max_model_len"],
        applied["server"]["cpu"]["kvcache_space_gib"],
        CFG["server"]["max_model_len"],
    ) == (2048, 1, 4096)
    assert "max_num_seqs" not in {k for k, v in applied["server"].items() if v is not None}


# --- stopping a process group ----------------------------------------------------------------------


def test_stop_kills_the_group_when_its_leader_has_already_exited():
    """A leader that leaves a child behind (as a dead API server leaves its engine core): stop() still ends the
    group."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys; subprocess.Popen(['sleep', '300']); sys.exit(3)"],
        start_new_session=True,
    )
    proc.wait(10)
    assert proc.returncode == 3 and group_alive(proc.pid)  # the sleeping child lives on in the group
    stop(proc, grace_s=5)
    assert not group_alive(proc.pid)


# --- locks shared by the users of a node -----------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to act as a second user")
def test_locks_work_for_a_second_user_of_the_node():
    import json
    import shutil
    import tempfile
    from pathlib import Path

    from kpadstudy import locks

    base = Path(tempfile.mkdtemp(prefix="kpad-locks-test-"))  # outside pytest's 0700 tmp: "nobody" must get in
    try:
        base.chmod(0o755)
        old_umask = os.umask(0o022)
        try:
            d = locks.lock_dir(str(base / "locks"))
            fd = locks.try_lock(d / "port-20000.lock")  # made by the first user (root)
            locks.release(fd)
            legacy = d / "gpu-0.lock"
            legacy.write_text("")  # as an older version left it: 0644, root's
        finally:
            os.umask(old_umask)
        assert (d.stat().st_mode & 0o7777, (d / "port-20000.lock").stat().st_mode & 0o777) == (0o1777, 0o666)
        (base / "closed").mkdir(mode=0o755)
        # the second user imports a copy of locks.py (standard library only) from base: the clone itself may sit
        # in a folder "nobody" cannot enter (a CI rehearsal cloned into a 0700 mktemp -d folder and failed here)
        package = base / "pkg" / "kpadstudy"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        shutil.copy(locks.__file__, package / "locks.py")
        for folder in (base / "pkg", package):
            folder.chmod(0o755)
        for f in package.iterdir():
            f.chmod(0o644)
        child = f"""
import json, sys
sys.path.insert(0, {str(base / "pkg")!r})
from pathlib import Path
from kpadstudy import locks
d = locks.lock_dir({str(d)!r})
got = [locks.try_lock(d / n) is not None for n in ("port-20000.lock", "gpu-0.lock", "cpu-slot-0.lock")]
try:
    locks.lock_dir({str(base / "closed")!r})
    err = ""
except PermissionError as e:
    err = str(e)
print(json.dumps({{"got": got, "err": err}}))
"""

        def as_nobody():
            os.setgid(65534)
            os.setuid(65534)

        python = "/usr/bin/python3"  # the venv's interpreter may sit under a home no other user can enter
        if not os.access(python, os.X_OK):
            pytest.skip(f"{python} is not there to run as a second user")
        p = subprocess.run([python, "-c", child], capture_output=True, text=True, preexec_fn=as_nobody)
        assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout)
        assert out["got"] == [True, True, True]  # root's file, root's legacy 0644 file (read-only), a new one
        assert (d / "cpu-slot-0.lock").stat().st_uid == 65534
        assert out["err"] == (
            f"lock directory {base / 'closed'} is not writable by this user (uid 65534): its owner (uid 0) can run "
            f"`chmod 1777 {base / 'closed'}`, or set config node.lock_dir / $KPAD_LOCK_DIR to a directory every "
            "user of this node can write"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_child_started_with_die_with_parent_dies_with_its_parent(tmp_path):
    """A run job killed with SIGKILL leaves no server or client behind: they get SIGKILL from the kernel."""
    code = (
        "import subprocess, sys, time; from kpadstudy.server import die_with_parent; "
        "c = subprocess.Popen(['sleep', '60'], preexec_fn=die_with_parent, start_new_session=True); "
        f"open({str(tmp_path / 'pid')!r}, 'w').write(str(c.pid)); time.sleep(60)"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT / "workflow" / "scripts"))
    parent = subprocess.Popen([sys.executable, "-c", code], env=env)
    pid_file = tmp_path / "pid"
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.1)
    child = int(pid_file.read_text())
    parent.kill()
    parent.wait()
    for _ in range(50):
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child), "the child outlived its SIGKILLed parent"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_nvidia_smi_answers_with_its_lines_or_none(tmp_path, monkeypatch):
    """One nvidia-smi call (kpadstudy.gpus.nvidia_smi) behind the GPU count, the NUMA CPUs and the driver version."""
    from kpadstudy import gpus, record

    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        '  -L) printf "GPU 0: NVIDIA H200 (UUID: a)\\nGPU 1: NVIDIA H200 (UUID: b)\\n" ;;\n'
        '  --query-gpu=driver_version) printf "580.159.04\\n580.159.04\\n" ;;\n'
        "  *) exit 3 ;;\n"
        "esac\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpus.visible_gpus(None) == ["0", "1"]
    assert record.gpu_driver_version() == "580.159.04"
    assert gpus.nvidia_smi(["--query-gpu=index,pci.bus_id"]) is None  # exit 3
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert gpus.nvidia_smi(["-L"]) is None and gpus.visible_gpus(None) == [] and record.gpu_driver_version() is None
