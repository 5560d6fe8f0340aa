"""Ray start-up: quiet, idempotent, and safe after a learner's own shutdown."""

import os

import pytest
import ray

from course import cluster
from notebooks import only_extended


def test_start_is_idempotent_and_survives_shutdown(ray_local):
    assert ray.is_initialized() and ray_local.cpus == 2 and ray_local.local
    again = cluster.start()
    assert again.cpus == 2  # no restart needed
    ray.shutdown()          # what a learner's cell might do
    info = cluster.start(num_cpus=2)
    assert ray.is_initialized() and info.cpus == 2
    assert "local Ray" in str(info)


def test_logical_gpus_restart_the_local_instance(ray_local):
    info = cluster.start(num_cpus=2, num_gpus=8)
    assert info.gpus == 8

    @ray.remote(num_gpus=1, num_cpus=0)
    class Holder:
        def gpu_ids(self):
            return ray.get_runtime_context().get_accelerator_ids()["GPU"]

    holders = [Holder.remote() for _ in range(8)]
    ids = ray.get([h.gpu_ids.remote() for h in holders])
    assert sorted(int(i[0]) for i in ids) == list(range(8))  # eight distinct logical GPUs
    for h in holders:
        ray.kill(h)
    cluster.start(num_cpus=2)  # enough already: stays as it is
    assert cluster.start().gpus == 8


def test_learners_own_ray_init_is_kept(ray_local):
    ray.shutdown()
    ray.init(address="local", num_cpus=1, log_to_driver=False)  # what a learner might type
    info = cluster.start()  # no request: the learner's Ray is used as it is
    assert info.cpus == 1
    assert cluster.start(num_cpus=2).cpus == 2  # a request it cannot meet: restarted locally


def _setup_cells(lab: str) -> list[str]:
    """A learner copy's code cells up to the one that starts Ray (its setup)."""
    import nbformat

    from notebooks import released

    cells = [c.source for c in nbformat.read(released(lab), as_version=4).cells if c.cell_type == "code"]
    first = next(i for i, src in enumerate(cells) if ".start(" in src)
    return cells[: first + 1]


PROBE = """import os, ray
@ray.remote(num_gpus=1, num_cpus=0)
def visible():
    return os.environ.get("CUDA_VISIBLE_DEVICES")
print("GPU", ray.cluster_resources().get("GPU", 0), ray.get(visible.remote()))
"""


@pytest.mark.slow
@pytest.mark.parametrize("lab, gpus", [("03_quotas", 16)])
def test_a_labs_setup_starts_with_one_visible_gpu(lab, gpus, tmp_path):
    """A Colab GPU runtime lists one device in CUDA_VISIBLE_DEVICES, and lab 03 asks Ray for 16
    logical GPUs, which Ray alone refuses ("Attempting to start raylet with 16 GPU"). Its setup
    cell starts there, and Ray does not point a task holding a logical GPU at a device id that
    does not exist (it leaves CUDA_VISIBLE_DEVICES unset: the task sees the machine's devices).
    Labs 00, 02 and 04 ask Ray for no GPUs beyond what it detects: nothing to refuse. Lab 01
    asks for the real devices on a GPU machine (logical ones only on a CPU machine, through the
    same cluster.start; 8 here, tested once by hand: 16 s), so CI runs lab 03 only."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in _setup_cells(lab) + [PROBE]])
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    NotebookClient(nb, timeout=300, resources={"metadata": {"path": str(tmp_path)}}).execute(
        env={**env, "CUDA_VISIBLE_DEVICES": "0"})
    _, count, seen = "".join(o.get("text", "") for o in nb.cells[-1].outputs).split()
    assert float(count) == gpus and seen == "None"


def test_logical_gpus_are_left_alone_when_the_devices_suffice(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with cluster._logical_gpus(2):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"
    with cluster._logical_gpus(16):
        assert "CUDA_VISIBLE_DEVICES" not in os.environ and os.environ[cluster.NOSET_CUDA_VISIBLE_DEVICES] == "1"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1" and cluster.NOSET_CUDA_VISIBLE_DEVICES not in os.environ


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def token_cluster(tmp_path, request):
    """A real two-node ``ray start`` cluster on localhost with token authentication on (head and
    one worker node, each ``--block`` so that ending them ends their processes). Indirect
    parameters are more ``ray start`` flags for both nodes."""
    import secrets
    import subprocess
    import sys
    import time
    from pathlib import Path

    token = tmp_path / "token"
    token.write_text(secrets.token_hex(32))
    port = _free_port()
    ray_cli = str(Path(sys.executable).parent / "ray")
    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN_PATH": str(token)}
    common = ["--block", "--num-cpus=1", "--object-store-memory=100000000", "--disable-usage-stats",
              *getattr(request, "param", [])]
    head = subprocess.Popen([ray_cli, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
                             "--include-dashboard=false", *common], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(5)
    worker = subprocess.Popen([ray_cli, "start", f"--address=127.0.0.1:{port}", "--node-ip-address=127.0.0.1",
                               *common], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield f"127.0.0.1:{port}", token
    finally:
        for proc in (worker, head):
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.mark.slow
def test_start_joins_a_token_cluster_or_says_what_to_set(token_cluster, tmp_path):
    """``ray start --head`` with token auth; a driver naming its address joins only with
    RAY_AUTH_MODE=token. ``cluster.start()`` turns it on when a token is at hand (here
    RAY_AUTH_TOKEN_PATH), and without one fails with one line that says what to set."""
    import subprocess
    import sys

    address, token = token_cluster
    join = ("import time, ray; from course import cluster; cluster.start(); t = time.time()\n"
            "while sum(n['Alive'] for n in ray.nodes()) < 2 and time.time() - t < 60: time.sleep(0.5)\n"
            "print(sum(n['Alive'] for n in ray.nodes()), ray.get(ray.remote(lambda: 'ran').remote()))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env.update(RAY_ADDRESS=address, HOME=str(tmp_path))  # no ~/.ray/auth_token in this HOME
    ok = subprocess.run([sys.executable, "-c", join], env={**env, "RAY_AUTH_TOKEN_PATH": str(token)},
                        capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert ok.returncode == 0 and ok.stdout.split() == ["2", "ran"], ok.stderr[-1500:]
    bad = subprocess.run([sys.executable, "-c", join], env=env, capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    last = bad.stderr.strip().splitlines()[-1]
    assert bad.returncode != 0 and last.startswith("ConnectionError: could not join the Ray cluster") \
        and "RAY_AUTH_TOKEN" in last, bad.stderr[-1500:]


@pytest.mark.slow
@pytest.mark.grading
@only_extended("lab 01 runs on a token cluster, below; grade --ray in tests/test_grading_cluster.py")
def test_lab00_gets_full_marks_on_a_token_cluster_and_the_sandbox_keeps_off_it(token_cluster, tmp_path):
    """The README's promise for a real cluster: ``RAY_ADDRESS`` names a two-node ``ray start``
    cluster with token auth on, and ``python -m autograder check --unsandboxed`` grades lab 00's
    solution with its kernel on that cluster (lab 00's checks need no Ray of the grader's own).
    In the sandbox (no network) the same check says that it does not use the cluster, grades the
    notebook on a Ray of its own, and the cluster sees no job of it."""
    import json
    import subprocess
    import sys

    from autograder.grader.isolation import sandbox
    from notebooks import solution

    address, token = token_cluster
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env.update(RAY_ADDRESS=address, RAY_AUTH_TOKEN_PATH=str(token), HOME=str(tmp_path))
    probe = "import ray; from course import cluster; cluster.start(); print(len(ray._private.state.jobs()))"  # no public job list without a dashboard

    def check(*flags: str) -> int:
        """Grade lab 00's solution with ``flags``; the number of jobs the cluster then lists."""
        proc = subprocess.run([sys.executable, "-m", "autograder", "check", str(solution("00_measure")), *flags],
                              env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
        report = json.loads(proc.stdout) if "--json" in flags else None
        if report is None:
            assert proc.returncode == 0 and "RAY_ADDRESS=" in proc.stdout and "14/14" in proc.stdout, \
                (proc.stdout[-1500:], proc.stderr[-1500:])
        else:
            failed = {r["name"]: r["message"] for r in report["checks"] if r["score"] < r["max_score"]}
            assert proc.returncode == 0 and not failed and report["score"] == report["max_score"], \
                (failed, proc.stderr[-1500:])
        jobs = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120,
                              cwd=tmp_path)
        assert jobs.returncode == 0, jobs.stderr[-1500:]
        return int(jobs.stdout.split()[-1])

    if not sandbox.unavailable():
        assert check() == 1  # the probe's own job only: the sandboxed kernel never reached the cluster
        assert check("--unsandboxed", "--json") >= 3  # the kernel's job, and the two probes'
    else:
        assert check("--unsandboxed", "--json") >= 2  # the kernel's job besides the probe's


@pytest.mark.slow
@pytest.mark.parametrize("token_cluster", [["--num-gpus=4", '--resources={"autograder_gpu": 4}']], indirect=True)
def test_lab01_runs_on_a_token_cluster_with_logical_gpus(token_cluster, tmp_path):
    """Lab 01's lesson with its exercises solved, executed as a learner runs it (nbclient, a
    kernel with ``RAY_ADDRESS``) on a two-node cluster whose nodes were started with 4 logical
    GPUs each: no cell raises, and the kernel's Ray is that cluster. Its grading
    does not use that cluster, by design: the grader starts a Ray of its own for each submission
    (autograder/grader/session/reference_process.py), so nothing on a shared cluster can reach the verdicts."""
    import nbformat
    from nbclient import NotebookClient

    from notebooks import solution

    address, token = token_cluster
    nb = nbformat.read(solution("01_actor_scaling"), as_version=4)
    # what a learner runs: the lab with the exercises solved, without the grader's hidden cells
    nb.cells = [c for c in nb.cells if "BEGIN HIDDEN TESTS" not in c.source]
    # the kernel's Ray is the cluster: two nodes, their 8 logical GPUs (a local Ray has one node)
    nb.cells.append(nbformat.v4.new_code_cell(
        "print(sum(n['Alive'] for n in ray.nodes()), ray.cluster_resources().get('GPU'))"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env.update(RAY_ADDRESS=address, RAY_AUTH_TOKEN_PATH=str(token), HOME=str(tmp_path))
    NotebookClient(nb, timeout=600, resources={"metadata": {"path": str(tmp_path)}}).execute(env=env)
    nodes, gpus = "".join(o.get("text", "") for o in nb.cells[-1].outputs).split()
    assert (nodes, float(gpus)) == ("2", 8.0)


def test_a_cluster_without_the_labs_resources_is_named_not_waited_on(monkeypatch):
    """Joining a cluster that lacks a lab's (logical) GPUs fails at once with the flags to start
    its nodes with, instead of actors waiting forever for resources no node has."""
    monkeypatch.setattr(cluster.ray, "cluster_resources", lambda: {"CPU": 2.0})
    with pytest.raises(RuntimeError) as err:
        cluster._wait_for({"GPU": 8, "autograder_gpu": 8, "CPU": None}, "10.0.0.1:6379", timeout_s=0)
    msg = str(err.value)
    assert "GPU: 0 of 8" in msg and "--num-gpus=N" in msg and '{"autograder_gpu": 8}' in msg and "CPU" not in msg.split("(")[1]
    monkeypatch.setattr(cluster.ray, "cluster_resources", lambda: {"CPU": 2.0, "GPU": 8.0, "autograder_gpu": 8.0})
    cluster._wait_for({"GPU": 8, "autograder_gpu": 8}, "10.0.0.1:6379", timeout_s=0)
