"""Kubernetes manifests as plain dicts: small builders, YAML output, and validation.

The builders write the objects a GPU-sharing policy needs on Kubernetes:

* core kinds -- ``Namespace``, ``ResourceQuota`` (``requests.nvidia.com/gpu`` per namespace),
  ``LimitRange`` -- validated against the real Kubernetes OpenAPI schemas shipped with the
  ``kubernetes-validate`` package (strict mode: unknown fields are errors), for the pinned
  :data:`K8S_VERSION`; works offline;
* a KubeRay ``RayCluster`` (``ray.io/v1``) whose GPU workers set ``limits: nvidia.com/gpu``;
  its pod templates are validated as real Kubernetes pod templates, its own fields against
  what KubeRay documents (docs.ray.io "RayCluster Configuration"; the KubeRay sample
  ``ray-cluster.complete.yaml``);
* Kueue ``ResourceFlavor``, ``ClusterQueue`` and ``LocalQueue`` (``kueue.x-k8s.io/v1beta2``: Kueue
  0.15 serves it, 0.16 stores it and deprecates ``v1beta1``, which is to be dropped -- Kueue's
  ``CHANGELOG/CHANGELOG-0.15.md`` and ``-0.16.md``; ``v1beta1`` is still accepted here, as a current
  Kueue still serves it), checked against Kueue's own v1beta2 CRD schemas (strict:
  :mod:`course.kueue_schema`) and the fields the Kueue docs use ("Administer cluster quotas",
  "Run A RayCluster"); a RayCluster joins a LocalQueue through the
  ``kueue.x-k8s.io/queue-name`` label.

:func:`validate` raises :class:`ManifestError` with one line: ``Kind/name: where: what``.
Nothing here talks to a cluster.
"""

from __future__ import annotations

import re

K8S_VERSION = "1.33"          # the Kubernetes schema version manifests are validated against
GPU = "nvidia.com/gpu"        # the NVIDIA device plugin's extended resource
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUBERAY_API = "ray.io/v1"
KUEUE_API = "kueue.x-k8s.io/v1beta2"   # Kueue's storage version from 0.16
KUEUE_API_DEPRECATED = "kueue.x-k8s.io/v1beta1"  # still served (deprecated) by a current Kueue
CORE_KINDS = ("Namespace", "ResourceQuota", "LimitRange", "Pod", "PodTemplate", "ConfigMap", "Service")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # RFC 1123 label: namespaces, most names


class ManifestError(ValueError):
    """A manifest that Kubernetes (or KubeRay/Kueue) would reject; the message says where and why."""


# ---------------------------------------------------------------- builders (core kinds)

def namespace(name: str, labels: dict | None = None) -> dict:
    """A Namespace (one per tenant)."""
    meta = {"name": name}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def resource_quota(ns: str, gpus: int, *, name: str = "gpu-quota", cpu: str | None = None,
                   memory: str | None = None) -> dict:
    """A ResourceQuota capping the namespace's GPU *requests* at ``gpus``.

    Extended resources take only the ``requests.`` prefix in a quota (kubernetes.io
    "Resource Quotas": overcommit is not allowed for extended resources).
    """
    hard = {f"requests.{GPU}": str(gpus)}
    if cpu is not None:
        hard["requests.cpu"] = str(cpu)
    if memory is not None:
        hard["requests.memory"] = str(memory)
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": ns},
            "spec": {"hard": hard}}


def limit_range(ns: str, max_gpus_per_container: int, *, name: str = "gpu-limits") -> dict:
    """A LimitRange: no single container in the namespace may ask for more GPUs than this."""
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name, "namespace": ns},
            "spec": {"limits": [{"type": "Container", "max": {GPU: str(max_gpus_per_container)}}]}}


def container(name: str, image: str, *, cpu: str = "1", memory: str = "2Gi", gpus: int = 0) -> dict:
    """A container with requests = limits; GPUs go in ``limits`` (kubernetes.io "Schedule GPUs")."""
    res = {"cpu": str(cpu), "memory": str(memory)}
    limits = dict(res)
    if gpus:
        limits[GPU] = str(gpus)
    return {"name": name, "image": image, "resources": {"requests": res, "limits": limits}}


# ---------------------------------------------------------------- KubeRay

def ray_cluster(name: str, ns: str, *, workers: int, gpus_per_worker: int = 1,
                min_workers: int = 0, ray_version: str = "2.60.0", image: str | None = None,
                queue: str | None = None, worker_cpu: str = "4", worker_memory: str = "16Gi") -> dict:
    """A KubeRay RayCluster: a CPU-only head and one GPU worker group of up to ``workers`` pods."""
    image = image or f"rayproject/ray:{ray_version}-gpu"
    meta = {"name": name, "namespace": ns}
    if queue:
        meta["labels"] = {QUEUE_LABEL: queue}
    head = container("ray-head", image, cpu="2", memory="8Gi")
    worker = container("ray-worker", image, cpu=worker_cpu, memory=worker_memory, gpus=gpus_per_worker)
    return {
        "apiVersion": KUBERAY_API, "kind": "RayCluster", "metadata": meta,
        "spec": {
            "rayVersion": ray_version,
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [head]}}},
            "workerGroupSpecs": [{
                "groupName": "gpu-workers", "replicas": workers, "minReplicas": min_workers,
                "maxReplicas": workers, "rayStartParams": {},
                "template": {"spec": {"containers": [worker]}},
            }],
        },
    }


def ray_job(name: str, ns: str, entrypoint: str, *, workers: int, gpus_per_worker: int = 1,
            ray_version: str = "2.60.0", image: str | None = None) -> dict:
    """A KubeRay RayJob: KubeRay starts a RayCluster for it and runs ``entrypoint`` on it; it tears
    the cluster down when the job ends only because ``shutdownAfterJobFinishes`` is set here (its
    default is false: KubeRay docs, "RayJob Quickstart")."""
    cluster = ray_cluster(name, ns, workers=workers, gpus_per_worker=gpus_per_worker, min_workers=workers,
                          ray_version=ray_version, image=image)
    return {"apiVersion": KUBERAY_API, "kind": "RayJob", "metadata": {"name": name, "namespace": ns},
            "spec": {"entrypoint": entrypoint, "shutdownAfterJobFinishes": True,
                     "rayClusterSpec": cluster["spec"]}}


def indexed_job(name: str, ns: str, image: str, *, completions: int, parallelism: int,
                gpus_per_pod: int = 1, command: list | None = None) -> dict:
    """A Kubernetes Indexed Job: ``completions`` pods, each told its shard by the
    ``JOB_COMPLETION_INDEX`` environment variable, ``parallelism`` of them at a time
    (kubernetes.io "Jobs", "Completion mode")."""
    pod = container("worker", image, gpus=gpus_per_pod)
    if command:
        pod["command"] = list(command)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
            "spec": {"completionMode": "Indexed", "completions": completions, "parallelism": parallelism,
                     "template": {"spec": {"restartPolicy": "Never", "containers": [pod]}}}}


# ---------------------------------------------------------------- Kueue

def resource_flavor(name: str = "default-flavor") -> dict:
    """A Kueue ResourceFlavor (an empty one: all GPU nodes alike)."""
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": name}}


def cluster_queue(name: str, gpus: int, *, flavor: str = "default-flavor", cpu: str = "64",
                  memory: str = "256Gi", namespaces: list[str] | None = None) -> dict:
    """A Kueue ClusterQueue admitting workloads while their GPU requests fit ``gpus``.

    ``namespaces`` restricts which namespaces' LocalQueues may use it (None: any).
    """
    selector = ({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                       "values": list(namespaces)}]} if namespaces else {})
    return {
        "apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {
            "namespaceSelector": selector,
            "resourceGroups": [{
                "coveredResources": ["cpu", "memory", GPU],
                "flavors": [{"name": flavor, "resources": [
                    {"name": "cpu", "nominalQuota": str(cpu)},
                    {"name": "memory", "nominalQuota": str(memory)},
                    {"name": GPU, "nominalQuota": str(gpus)},
                ]}],
            }],
        },
    }


def local_queue(ns: str, cluster_queue_name: str, *, name: str = "gpu-queue") -> dict:
    """A Kueue LocalQueue in a tenant's namespace, pointing at a ClusterQueue."""
    return {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterQueue": cluster_queue_name}}


# ---------------------------------------------------------------- what the builders take

BUILDERS = ("namespace", "resource_quota", "limit_range", "ray_cluster", "resource_flavor",
            "cluster_queue", "local_queue")


def signatures() -> str:
    """Each builder's call signature and the first line of its docstring, for a notebook to print.

    Computed with :func:`inspect.signature`, so it always matches the code (a lab's cells may
    not import ``inspect``: the static check refuses it).
    """
    import inspect

    lines = []
    for name in BUILDERS:
        fn = globals()[name]
        lines += [f"k8s.{name}{inspect.signature(fn, eval_str=True)}",
                  f"    {inspect.getdoc(fn).splitlines()[0]}"]
    return "\n".join(lines)


# ---------------------------------------------------------------- output

def to_yaml(objs) -> str:
    """One YAML stream (``---`` between documents), ready for ``kubectl apply -f``."""
    import yaml

    if isinstance(objs, dict):
        objs = [objs]
    return yaml.safe_dump_all(list(objs), sort_keys=False, default_flow_style=False)


# ---------------------------------------------------------------- validation

def _where(obj) -> str:
    if not isinstance(obj, dict):
        return f"<{type(obj).__name__}>"
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    return f"{obj.get('kind', '<no kind>')}/{meta.get('name', '<no name>')}"


def _fail(obj, path: str, message: str):
    raise ManifestError(f"{_where(obj)}: {path}: {message}" if path else f"{_where(obj)}: {message}")


def _schema(obj, data: dict, prefix: str = "", drop: int = 0) -> None:
    """Validate ``data`` (a core-kind dict) against the Kubernetes schema; errors name ``obj``."""
    import kubernetes_validate as kv

    try:
        kv.validate(data, K8S_VERSION, strict=True)
    except kv.ValidationError as exc:
        err = exc.caused_by if hasattr(exc, "caused_by") else exc
        path = ".".join(str(p) for p in list(getattr(err, "path", []))[drop:]) or "(top level)"
        message = str(getattr(err, "message", err)).splitlines()[0]
        _fail(obj, prefix + path, message)
    except kv.SchemaNotFoundError:
        _fail(obj, "", f"no Kubernetes {K8S_VERSION} schema for {data.get('apiVersion')}/{data.get('kind')}")


def whole_number(value) -> int | None:
    """``value`` as a whole number of devices (int or a digit string), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"[0-9]+", value):  # ASCII only: "３" is no quantity
        return int(value)
    return None


def _need(obj, data, key, path, kind=None):
    if not isinstance(data, dict) or key not in data:
        _fail(obj, path, f"missing required field {key!r}")
    value = data[key]
    if kind is not None and not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        _fail(obj, f"{path}.{key}" if path else key, f"must be {names}, got {type(value).__name__}")
    return value


def _meta(obj, namespaced: bool) -> dict:
    meta = _need(obj, obj, "metadata", "", dict)
    name = _need(obj, meta, "name", "metadata", str)
    if not _NAME.match(name):
        _fail(obj, "metadata.name", f"{name!r} is not a valid name (lower-case letters, digits, '-')")
    if namespaced:
        _need(obj, meta, "namespace", "metadata", str)
    return meta


def _template(obj, template, path: str) -> None:
    if not isinstance(template, dict):
        _fail(obj, path, "missing pod template")
    _schema(obj, {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                  "template": template}, prefix=path + ".", drop=1)
    containers = (template.get("spec") or {}).get("containers") or []
    if not containers:
        _fail(obj, f"{path}.spec.containers", "a pod template needs at least one container")
    for i, c in enumerate(containers):
        res = c.get("resources") or {}
        for part in ("requests", "limits"):
            if GPU in (res.get(part) or {}) and whole_number(res[part][GPU]) is None:
                _fail(obj, f"{path}.spec.containers[{i}].resources.{part}",
                      f"{GPU} must be a whole number, got {res[part][GPU]!r} (GPUs cannot be shared this way)")
        if GPU in (res.get("requests") or {}) and GPU not in (res.get("limits") or {}):
            _fail(obj, f"{path}.spec.containers[{i}].resources.limits",
                  f"{GPU} must be set in limits (kubernetes.io 'Schedule GPUs')")


def _raycluster(obj) -> None:
    if obj.get("apiVersion") != KUBERAY_API:
        _fail(obj, "apiVersion", f"expected {KUBERAY_API!r}, got {obj.get('apiVersion')!r}")
    _meta(obj, namespaced=True)
    spec = _need(obj, obj, "spec", "", dict)
    # RayClusterSpec's fields in KubeRay v1.7.0 (ray-operator/apis/ray/v1/raycluster_types.go): authOptions
    # and upgradeStrategy from v1.6.0, historyServerOptions, networkPolicy and tlsOptions from v1.7.0.
    extra = set(spec) - {"rayVersion", "headGroupSpec", "workerGroupSpecs", "enableInTreeAutoscaling",
                         "autoscalerOptions", "suspend", "headServiceAnnotations", "gcsFaultToleranceOptions",
                         "managedBy", "authOptions", "upgradeStrategy", "historyServerOptions", "networkPolicy",
                         "tlsOptions"}
    if extra:
        _fail(obj, "spec", f"unknown field(s) {', '.join(sorted(extra))}")
    _need(obj, spec, "rayVersion", "spec", str)
    head = _need(obj, spec, "headGroupSpec", "spec", dict)
    _template(obj, _need(obj, head, "template", "spec.headGroupSpec", dict), "spec.headGroupSpec.template")
    groups = spec.get("workerGroupSpecs", [])
    if not isinstance(groups, list):
        _fail(obj, "spec.workerGroupSpecs", "must be a list")
    seen = set()
    for i, g in enumerate(groups):
        path = f"spec.workerGroupSpecs[{i}]"
        name = _need(obj, g, "groupName", path, str)
        if name in seen:
            _fail(obj, path, f"duplicate groupName {name!r}")
        seen.add(name)
        counts = {}
        for key in ("replicas", "minReplicas", "maxReplicas"):
            if key in g:
                counts[key] = whole_number(g[key]) if isinstance(g[key], int) else None
                if counts[key] is None or counts[key] < 0:
                    _fail(obj, f"{path}.{key}", f"must be a non-negative integer, got {g[key]!r}")
        lo, hi = counts.get("minReplicas", 0), counts.get("maxReplicas")
        if hi is not None and lo > hi:
            _fail(obj, path, f"minReplicas {lo} > maxReplicas {hi}")
        if hi is not None and "replicas" in counts and not lo <= counts["replicas"] <= hi:
            _fail(obj, path, f"replicas {counts['replicas']} outside [minReplicas {lo}, maxReplicas {hi}]")
        _template(obj, _need(obj, g, "template", path, dict), f"{path}.template")


def _rayjob(obj) -> None:
    """A RayJob: an entrypoint and a RayCluster spec, checked as a RayCluster's."""
    if obj.get("apiVersion") != KUBERAY_API:
        _fail(obj, "apiVersion", f"expected {KUBERAY_API!r}, got {obj.get('apiVersion')!r}")
    meta = _meta(obj, namespaced=True)
    spec = _need(obj, obj, "spec", "", dict)
    _need(obj, spec, "entrypoint", "spec", str)
    cluster = _need(obj, spec, "rayClusterSpec", "spec", dict)
    _raycluster({"apiVersion": KUBERAY_API, "kind": "RayCluster", "metadata": meta, "spec": cluster})


# A quota's resource name: an optional requests./limits. prefix, a DNS-subdomain-style prefix
# and a name (requests.nvidia.com/gpu, count/deployments.apps, pods); lower case, ASCII.
RESOURCE_NAME = r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?(/[a-z0-9]([-a-z0-9._]*[a-z0-9])?)?"


def _quantity(value) -> bool:
    """A non-negative Kubernetes quantity: a number, or a string like "4", "500m", "2Gi" (ASCII)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < float("inf") or (
        isinstance(value, str) and re.fullmatch(r"[0-9]+(\.[0-9]+)?([KMGTPE]i?|[mkMGTPE])?", value) is not None)


def _strict(schema):
    """A CRD schema in which an object that names its properties allows no others."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if ("properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def _kueue_schema(obj) -> None:
    """``obj`` against Kueue's own v1beta2 CRD schema (:mod:`course.kueue_schema`), strictly."""
    import jsonschema

    from .kueue_schema import SCHEMAS

    schema = _strict(SCHEMAS[obj["kind"]])
    schema["properties"]["metadata"] = {"type": "object"}  # checked by _meta
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(obj), key=lambda e: list(e.path))
    if errors:
        err = errors[0]
        _fail(obj, ".".join(str(p) for p in err.path) or "(top level)",
              f"{err.message.splitlines()[0]} (Kueue's {KUEUE_API} schema)")


def _kueue(obj) -> None:
    kind = obj["kind"]
    if obj.get("apiVersion") not in (KUEUE_API, KUEUE_API_DEPRECATED):
        _fail(obj, "apiVersion", f"expected {KUEUE_API!r}, got {obj.get('apiVersion')!r}")
    _meta(obj, namespaced=kind == "LocalQueue")
    if obj["apiVersion"] == KUEUE_API:
        _kueue_schema(obj)
    if kind == "ResourceFlavor":
        return
    spec = _need(obj, obj, "spec", "", dict)
    if kind == "LocalQueue":
        _need(obj, spec, "clusterQueue", "spec", str)
        return
    groups = _need(obj, spec, "resourceGroups", "spec", list)
    if not groups:
        _fail(obj, "spec.resourceGroups", "needs at least one resource group")
    for i, g in enumerate(groups):
        path = f"spec.resourceGroups[{i}]"
        covered = _need(obj, g, "coveredResources", path, list)
        flavors = _need(obj, g, "flavors", path, list)
        if not flavors:
            _fail(obj, f"{path}.flavors", "needs at least one flavor")
        for j, f in enumerate(flavors):
            fpath = f"{path}.flavors[{j}]"
            _need(obj, f, "name", fpath, str)
            resources = _need(obj, f, "resources", fpath, list)
            names = [r.get("name") for r in resources if isinstance(r, dict)]
            if names != list(covered):
                _fail(obj, f"{fpath}.resources", f"must list the coveredResources {covered} in order, got {names}")
            for k, r in enumerate(resources):
                q = _need(obj, r, "nominalQuota", f"{fpath}.resources[{k}]")
                if not _quantity(q):
                    _fail(obj, f"{fpath}.resources[{k}].nominalQuota", f"{q!r} is not a quantity")


def validate(obj) -> dict:
    """Check one manifest; return it, or raise :class:`ManifestError` saying what is wrong."""
    if not isinstance(obj, dict):
        raise ManifestError(f"a manifest is a dict, not {type(obj).__name__}")
    kind = obj.get("kind")
    if not isinstance(kind, str) or not obj.get("apiVersion"):
        raise ManifestError(f"{_where(obj)}: a manifest needs apiVersion and kind")
    if kind == "RayCluster":
        _raycluster(obj)
    elif kind == "RayJob":
        _rayjob(obj)
    elif kind in ("ClusterQueue", "LocalQueue", "ResourceFlavor"):
        _kueue(obj)
    elif obj["apiVersion"] in ("v1", "apps/v1", "batch/v1"):
        _schema(obj, obj)
        _meta(obj, namespaced=kind not in ("Namespace",))
        if kind == "ResourceQuota":
            for key, value in ((obj.get("spec") or {}).get("hard") or {}).items():
                if not re.fullmatch(RESOURCE_NAME, key):
                    _fail(obj, f"spec.hard.{key}", "not a resource name (lower-case, e.g. requests.cpu, pods, "
                          f"requests.{GPU})")
                if not _quantity(value):
                    _fail(obj, f"spec.hard.{key}", f"not a Kubernetes quantity: {value!r} (e.g. \"4\", \"500m\", \"2Gi\")")
                if key.endswith(GPU) and key != f"requests.{GPU}":
                    _fail(obj, f"spec.hard.{key}", f"extended resources take only the requests. prefix "
                          f"(use requests.{GPU}; kubernetes.io 'Resource Quotas')")
                if key.endswith(GPU) and whole_number(obj["spec"]["hard"][key]) is None:
                    _fail(obj, f"spec.hard.{key}", f"must be a whole number of GPUs, got {obj['spec']['hard'][key]!r}")
        if kind in ("Pod",):
            _template(obj, {"spec": obj.get("spec")}, "spec")
    else:
        raise ManifestError(f"{_where(obj)}: no schema for {obj['apiVersion']}/{kind} in this course")
    return obj


def validate_all(objs) -> list[dict]:
    """:func:`validate` every manifest of a list."""
    if isinstance(objs, dict) or not hasattr(objs, "__iter__"):
        raise ManifestError(f"expected a list of manifests, got {type(objs).__name__}")
    return [validate(o) for o in objs]


# ---------------------------------------------------------------- reading a policy back

def by_kind(objs, kind: str) -> list[dict]:
    return [o for o in objs if isinstance(o, dict) and o.get("kind") == kind]


def scoped(quota: dict) -> bool:
    """Whether a ResourceQuota counts only some pods: "A quota will only measure usage for a
    resource if it matches the intersection of enumerated scopes" (kubernetes.io, "Resource
    Quotas", "Quota Scopes") -- so a scoped quota does not cap a whole namespace."""
    spec = quota.get("spec") or {}
    return bool(spec.get("scopes") or spec.get("scopeSelector"))


def gpu_quota(objs) -> dict[str, int]:
    """Namespace -> the ``requests.nvidia.com/gpu`` of its unscoped ResourceQuota(s) (the
    smallest, if several): the GPUs the namespace's pods may request in all."""
    out: dict[str, int] = {}
    for q in by_kind(objs, "ResourceQuota"):
        if scoped(q):
            continue
        value = whole_number(((q.get("spec") or {}).get("hard") or {}).get(f"requests.{GPU}"))
        if value is not None:
            ns = q["metadata"].get("namespace")
            out[ns] = min(out.get(ns, value), value)
    return out


def _pod_gpus(template) -> int:
    total = 0
    for c in ((template or {}).get("spec") or {}).get("containers") or []:
        limits = (c.get("resources") or {}).get("limits") or {}
        total += whole_number(limits.get(GPU, 0)) or 0
    return total


def raycluster_max_gpus(rc: dict) -> int:
    """The most GPUs a RayCluster can hold: head pod plus every worker group at maxReplicas, each
    replica ``numOfHosts`` pods (a multi-host group; KubeRay's ``WorkerGroupSpec``, default 1)."""
    spec = rc.get("spec") or {}
    total = _pod_gpus((spec.get("headGroupSpec") or {}).get("template"))
    for g in spec.get("workerGroupSpecs") or []:
        n, hosts = g.get("maxReplicas", g.get("replicas", 0)), g.get("numOfHosts", 1)
        total += (n if isinstance(n, int) else 0) * (hosts if isinstance(hosts, int) else 1) * _pod_gpus(g.get("template"))
    return total


def queue_gpus(objs) -> dict[str, int]:
    """ClusterQueue name -> its nominal GPU quota (summed over flavors)."""
    out = {}
    for cq in by_kind(objs, "ClusterQueue"):
        total = 0
        for g in (cq.get("spec") or {}).get("resourceGroups") or []:
            for f in g.get("flavors") or []:
                for r in f.get("resources") or []:
                    if r.get("name") == GPU:
                        total += whole_number(r.get("nominalQuota")) or 0
        out[cq["metadata"]["name"]] = total
    return out
