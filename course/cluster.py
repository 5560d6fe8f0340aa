"""Start or join Ray quietly, the same way in every lab.

``start()`` joins the cluster named by ``RAY_ADDRESS`` when it is set (e.g. a KubeRay
cluster), otherwise starts a local Ray. It is idempotent and safe to call again after a
learner's own ``ray.init`` or ``ray.shutdown``. Logs from workers are not forwarded to the
notebook: nbgrader gives 0 to a graded cell that writes to stderr, and Ray writes there a lot.

``emulated()`` builds a multi-node cluster on one machine with ``ray.cluster_utils.Cluster``:
several raylets, each with its own object store, so transfers, locality and node loss are
real even on a laptop.
"""

from __future__ import annotations

import json
import logging
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# Quiet before Ray is imported: no usage-stats prompt, no deduplication banners.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")

import ray  # noqa: E402

NOSET_CUDA_VISIBLE_DEVICES = "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"
DEFAULT_OBJECT_STORE_MB = 512  # small: fits Colab's /dev/shm and 2-core CI machines
JOIN_WAIT_S = 20.0  # how long a joined cluster's worker nodes get to register before a lab says what is missing


@dataclass(frozen=True)
class ClusterInfo:
    """What the driver is connected to."""

    address: str
    local: bool
    resources: dict

    @property
    def gpus(self) -> float:
        """GPUs Ray schedules with (logical GPUs on an emulated fleet)."""
        return self.resources.get("GPU", 0.0)

    @property
    def cpus(self) -> float:
        return self.resources.get("CPU", 0.0)

    def __str__(self) -> str:
        where = "local Ray" if self.local else f"Ray at {self.address}"
        return f"{where}: {self.cpus:g} CPU, {self.gpus:g} GPU"


def gcs_actor(actor_id: str) -> dict:
    """Ray's own record of an actor (GCS actor table): state, pid, restarts, class, job.

    Read by the grader to find the process to kill, instead of asking the actor (whose answer
    would come from where learner code runs). Uses ``ray._private.state``: the public state
    API (``ray.util.state``) needs the dashboard, which the grader's Ray does not start.
    """
    from ray._private import state

    return state.actors(actor_id) or {}


_started_with: dict | None = None  # the arguments of the local Ray this module started
_emulated = None  # the ray.cluster_utils.Cluster that emulated() started, if any


def _info() -> ClusterInfo:
    ctx = ray.get_runtime_context()
    address = getattr(ctx, "gcs_address", "") or ""
    return ClusterInfo(address, "RAY_ADDRESS" not in os.environ, dict(ray.cluster_resources()))


def _satisfies(have: dict, want: dict) -> bool:
    return all(have.get(k, 0.0) >= v for k, v in want.items() if v)


def start(
    *,
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    resources: dict | None = None,
    object_store_mb: int = DEFAULT_OBJECT_STORE_MB,
    dashboard: bool = False,
) -> ClusterInfo:
    """Connect to Ray, starting a quiet local instance if needed, and describe it.

    ``num_gpus`` may exceed the GPUs present: Ray then schedules *logical* GPUs (an
    accounting fiction that lets scheduling lessons run at fleet size on one machine). Where
    ``CUDA_VISIBLE_DEVICES`` lists fewer devices (a Colab GPU runtime lists one), see
    :func:`_logical_gpus`.
    ``dashboard=True`` starts the dashboard process, which Ray's state API needs (~2 s more).

    Calling it again is cheap. If Ray is already running locally without the requested
    resources (or without the dashboard when asked), the local instance is restarted.
    """
    global _started_with
    want = {"CPU": num_cpus, "GPU": num_gpus, **(resources or {})}
    remote = os.environ.get("RAY_ADDRESS")
    if ray.is_initialized():
        ok = _satisfies(ray.cluster_resources(), want)
        if dashboard and _started_with is not None and not _started_with.get("dashboard"):
            ok = False
        if ok or remote:
            return _info()
        ray.shutdown()
    kwargs = dict(
        log_to_driver=False,
        logging_level=logging.ERROR,
        configure_logging=True,
        include_dashboard=dashboard,
        ignore_reinit_error=True,
    )
    if remote:
        _token_auth_to_join()
        try:
            ray.init(address=remote, **kwargs)
        except (ConnectionError, RuntimeError, ray.exceptions.AuthenticationError) as exc:
            raise ConnectionError(_cannot_join(remote, exc)) from None
        _wait_for(want, remote)
    else:
        # address="local": always a fresh instance. A bare ray.init() would join whatever
        # cluster /tmp/ray/ray_current_cluster names -- and ray.cluster_utils.Cluster (an
        # emulated cluster in another notebook or test) writes that file.
        with _logical_gpus(num_gpus):
            ray.init(
                address="local",
                num_cpus=num_cpus,
                num_gpus=num_gpus,
                resources=resources or None,
                object_store_memory=object_store_mb * 2**20,
                **kwargs,
            )
        _started_with = {"dashboard": dashboard}
    return _info()


def _wait_for(want: dict, address: str, timeout_s: float = JOIN_WAIT_S) -> None:
    """Wait until the joined cluster has the resources a lab asked for, else say what is missing.

    Worker nodes register a few seconds after the head, so a short wait; past it, a lab's actors
    would wait forever for resources no node has (Ray logs that only to the driver, which the
    kit keeps quiet), so fail with one line naming what to start the nodes with instead.
    """
    deadline = time.monotonic() + timeout_s
    while not _satisfies(have := ray.cluster_resources(), want):
        if time.monotonic() > deadline:
            lacking = {k: v for k, v in want.items() if v and have.get(k, 0.0) < v}
            short = ", ".join(f"{k}: {have.get(k, 0.0):g} of {v:g}" for k, v in lacking.items())
            flags = " ".join(f"--num-{k.lower()}s=N" for k in lacking if k in ("CPU", "GPU"))
            custom = {k: v for k, v in lacking.items() if k not in ("CPU", "GPU")}
            if custom:
                flags += f" --resources='{json.dumps(custom)}'"
            raise RuntimeError(f"the Ray cluster at RAY_ADDRESS={address} lacks what this lab needs ({short}); "
                               f"start its nodes with more (ray start ... {flags.strip()}; logical GPUs count) "
                               "or unset RAY_ADDRESS to use a local Ray")
        time.sleep(0.5)


def _token_auth_to_join() -> None:
    """Use Ray's token authentication to join ``RAY_ADDRESS`` when a token is at hand.

    Ray 2.60 turns token authentication on for a new local Ray and for ``ray start --head``
    where a token exists, but a driver that names an address uses it only when
    ``RAY_AUTH_MODE=token`` is set (Ray's ``python/ray/_private/worker.py``: "an explicit
    address never does"). The token comes from Ray's documented places: ``RAY_AUTH_TOKEN``, the
    file ``RAY_AUTH_TOKEN_PATH`` names, or ``~/.ray/auth_token``. An explicit ``RAY_AUTH_MODE``
    is left as it is.
    """
    if "RAY_AUTH_MODE" in os.environ:
        return
    path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    if os.environ.get("RAY_AUTH_TOKEN") or path.is_file():
        # what Ray itself does to turn token mode on in a running process (it caches its config)
        from ray._private.authentication.authentication_token_setup import _enable_token_auth

        _enable_token_auth()


def _cannot_join(address: str, exc: Exception) -> str:
    """One line on why joining ``address`` failed, and what to set."""
    first = next((ln for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)[:200]
    return (f"could not join the Ray cluster at RAY_ADDRESS={address} ({first}). A cluster with token "
            "authentication needs its token here: set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) and "
            "RAY_AUTH_MODE=token -- https://docs.ray.io/en/latest/ray-security/token-auth.html")


@contextmanager
def _logical_gpus(num_gpus: int | None):
    """Let a local Ray count more GPUs than ``CUDA_VISIBLE_DEVICES`` lists.

    Ray refuses to start a node with more GPUs than that variable names (``ray.init(num_gpus=16)``
    with ``CUDA_VISIBLE_DEVICES=0``: "Attempting to start raylet with 16 GPU"). Logical GPUs are
    only counted, so for such a start the variable is hidden from ``ray.init`` (and so from the
    raylet and its workers), with ``RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES`` set (Ray's GPU
    docs) so that Ray does not set it to a logical GPU's id either: every task and actor sees the
    machine's devices -- on Colab, its one GPU. (Passing the variable back through the job's
    ``runtime_env`` instead made lab 03's 16 workers start in 43 s instead of 26.) The driver
    keeps its own value.
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    devices = [d for d in (visible or "").split(",") if d.strip()]
    if num_gpus is None or visible is None or num_gpus <= len(devices):
        yield
        return
    saved = os.environ.pop("CUDA_VISIBLE_DEVICES"), os.environ.get(NOSET_CUDA_VISIBLE_DEVICES)
    os.environ[NOSET_CUDA_VISIBLE_DEVICES] = "1"  # the raylet, and the workers it starts, inherit it
    try:
        yield
    finally:
        os.environ["CUDA_VISIBLE_DEVICES"] = saved[0]
        if saved[1] is None:
            del os.environ[NOSET_CUDA_VISIBLE_DEVICES]
        else:
            os.environ[NOSET_CUDA_VISIBLE_DEVICES] = saved[1]


def stop() -> None:
    """Shut Ray down (the next :func:`start` starts it again), and any emulated cluster.

    The driver disconnects first: nodes killed under a connected driver make it report
    "lost objects" on stderr.
    """
    global _started_with, _emulated
    if ray.is_initialized():
        ray.shutdown()
    _started_with = None
    if _emulated is not None:
        _emulated.shutdown()
        _emulated = None


def emulated(nodes: int = 3, *, cpus_per_node: int = 1, gpus_per_node: int = 0,
             object_store_mb: int = 128, dashboard: bool = False):
    """An emulated multi-node Ray cluster on this machine, with the driver connected.

    Returns the ``ray.cluster_utils.Cluster``; ``cluster.remove_node(node)`` is real node
    loss. Each node carries a custom resource ``node{i}`` (one unit) so lessons can name
    nodes. :func:`stop` (or the end of the Python process) shuts it down.
    """
    import atexit

    from ray.cluster_utils import Cluster

    global _emulated
    stop()
    cluster = _emulated = Cluster()
    for i in range(nodes):
        cluster.add_node(
            num_cpus=cpus_per_node,
            num_gpus=gpus_per_node,
            resources={f"node{i}": 1},
            object_store_memory=object_store_mb * 2**20,
            include_dashboard=dashboard and i == 0,
        )
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.ERROR)
    atexit.register(stop)  # registered last, runs first: the driver leaves before the nodes die
    return cluster
