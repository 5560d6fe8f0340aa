"""Ray start-up: quiet, idempotent, and safe after a learner's own shutdown."""

import ray

from course import cluster


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
