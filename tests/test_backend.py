import numpy as np
import pytest

from course import backend


@pytest.fixture
def fresh(monkeypatch):
    """Forget the cached backend choice, so COURSE_BACKEND is read again."""
    backend.name.cache_clear()
    backend.facts.cache_clear()
    yield monkeypatch
    backend.name.cache_clear()
    backend.facts.cache_clear()


def test_forced_numpy(fresh):
    fresh.setenv("COURSE_BACKEND", "numpy")
    assert backend.name() == "numpy"
    assert backend.xp() is np
    assert not backend.on_gpu()


def test_forcing_cupy_without_gpu_is_a_clear_error(fresh):
    if backend.gpu_status()[0]:
        pytest.skip("a GPU is visible here")
    fresh.setenv("COURSE_BACKEND", "cupy")
    with pytest.raises(backend.BackendError, match="COURSE_BACKEND=cupy, but"):
        backend.name()


def test_unknown_backend_is_rejected(fresh):
    fresh.setenv("COURSE_BACKEND", "torch")
    with pytest.raises(backend.BackendError, match="choose one of numpy, cupy"):
        backend.name()


def test_default_follows_gpu_status(fresh):
    fresh.delenv("COURSE_BACKEND", raising=False)
    assert backend.name() == ("cupy" if backend.gpu_status()[0] else "numpy")


def test_sync_runs_deferred_work_in_order():
    ran = []
    backend.defer(lambda: ran.append(1))
    backend.defer(lambda: ran.append(2))
    assert ran == []
    backend.sync()
    assert ran == [1, 2]
    backend.sync()
    assert ran == [1, 2]


def test_facts_and_fingerprint(fresh):
    fresh.setenv("COURSE_BACKEND", "numpy")
    f = backend.facts()
    assert f.backend == "numpy" and f.device == "cpu" and f.cores >= 1
    assert f.cpu and "backend=numpy" in str(f)
    fp = backend.fingerprint()
    assert fp.startswith(f"numpy-cpu-{f.cores}c-") and fp == backend.fingerprint()


def test_host_device_round_trip():
    a = np.arange(12, dtype=np.uint8).reshape(3, 4)
    assert np.array_equal(backend.to_host(backend.to_device(a)), a)


@pytest.mark.gpu
def test_gpu_facts_name_the_device():
    f = backend.facts()
    assert f.backend == "cupy" and f.device != "cpu" and f.memory_gib > 1
