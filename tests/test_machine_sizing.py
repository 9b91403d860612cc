"""How a loop sizes itself for the machine or cluster it runs on (pure functions, tested without a GPU)."""

from __future__ import annotations

import pytest

from selfplay.actors.actor import SelfPlayConfig, actors_for_machine
from train.loop.cluster import cluster_actors, placement


def test_auto_device_keeps_the_cpu_sizing_without_cuda_and_takes_the_gpu_sizing_with_it():
    cfg = SelfPlayConfig()
    assert cfg.device == "auto"
    cpu = cfg.sized_for(cuda=False)
    assert (cpu.device, cpu.games_in_flight, cpu.search.leaves_per_tree) == ("cpu", 64, 2)
    gpu = cfg.sized_for(cuda=True)
    assert (gpu.device, gpu.games_in_flight, gpu.search.leaves_per_tree) == ("cuda", 512, 4)
    assert cfg.search.leaves_per_tree == 2  # the settings themselves are not changed
    # An explicit device wins over what torch sees.
    assert SelfPlayConfig(device="cpu").sized_for(cuda=True).games_in_flight == 64
    forced = SelfPlayConfig(device="cuda", gpu_games_in_flight=128).sized_for(cuda=False)
    assert (forced.device, forced.games_in_flight) == ("cuda", 128)


def test_bad_gpu_sizing_or_device_is_refused():
    for bad in (SelfPlayConfig(device="tpu"), SelfPlayConfig(gpu_games_in_flight=0),
                SelfPlayConfig(gpu_leaves_per_tree=0)):
        with pytest.raises(ValueError):
            bad.validate()


def test_loop_actors_are_sized_for_the_machine_unless_set():
    assert actors_for_machine(-1, cuda=False, cpu_cores=2) == 2  # the trainer shares the actors' cores
    assert actors_for_machine(-1, cuda=False, cpu_cores=1) == 1
    assert actors_for_machine(-1, cuda=False, cpu_cores=32) == 30
    assert actors_for_machine(-1, cuda=True, cpu_cores=16) == 14  # the trainer and gatekeeper take two cores
    assert actors_for_machine(-1, cuda=True, cpu_cores=2) == 1
    assert actors_for_machine(3, cuda=True, cpu_cores=16) == 3
    assert actors_for_machine(0, cuda=False, cpu_cores=2) == 0


def test_cluster_placement_gives_the_trainer_a_gpu_and_shares_the_rest():
    cpus_only = {"CPU": 16.0}
    assert placement("trainer", cpus_only, 14) == {"num_cpus": 1, "num_gpus": 0.0}
    assert placement("actor-3", cpus_only, 14) == {"num_cpus": 1, "scheduling_strategy": "SPREAD"}
    assert placement("gatekeeper", cpus_only, 14) == {"num_cpus": 1}
    assert cluster_actors(-1, cpus_only) == 14 and cluster_actors(5, cpus_only) == 5

    one_gpu = {"CPU": 16.0, "GPU": 1.0}
    trainer = placement("trainer", one_gpu, 14)["num_gpus"]
    shares = [placement(f"actor-{a}", one_gpu, 14)["num_gpus"] for a in range(14)]
    shares.append(placement("gatekeeper", one_gpu, 14)["num_gpus"])
    assert trainer == 0.5 and 0 < shares[0] and trainer + sum(shares) <= 1.0

    four_gpus = {"CPU": 64.0, "GPU": 4.0}
    assert placement("trainer", four_gpus, 2)["num_gpus"] == 1.0
    assert placement("actor-0", four_gpus, 2)["num_gpus"] == 1.0  # more GPUs than actors: one each
    many = [placement(f"actor-{a}", four_gpus, 62)["num_gpus"] for a in range(62)]
    assert 1.0 + sum(many) + placement("gatekeeper", four_gpus, 62)["num_gpus"] <= 4.0


def test_process_memory_is_the_least_of_the_machines_its_limits_and_its_cgroups(tmp_path, monkeypatch):
    # The search trees were sized from the machine's memory alone: a process under a smaller limit grew
    # them past it and died (issue 68, item 7).
    import os
    import resource

    from zero.run import machine

    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    v2.write_text("max\n")
    v1.write_text("9223372036854771712\n")  # cgroup v1's "no limit"
    monkeypatch.setattr(machine, "CGROUP_MEMORY_FILES", (v2, v1, tmp_path / "absent"))
    limits = {resource.RLIMIT_AS: resource.RLIM_INFINITY, resource.RLIMIT_DATA: resource.RLIM_INFINITY}
    monkeypatch.setattr(resource, "getrlimit", lambda which: (limits[which], resource.RLIM_INFINITY))
    assert machine.process_memory() == physical
    v2.write_text(f"{physical // 2}\n")
    assert machine.process_memory() == physical // 2
    limits[resource.RLIMIT_DATA] = physical // 3
    assert machine.process_memory() == physical // 3
    limits[resource.RLIMIT_AS] = physical // 4
    assert machine.process_memory() == physical // 4
