"""Properties of the device split (derive/cluster.py), over random cluster shapes and engine sizes,
through the real resolution pipeline: every device is accounted for exactly once, the trainer
fits one node or fills whole nodes, and a config is refused exactly when the split is impossible."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.errors import ConfigError

PER_NODE = {"a100": 8, "ascend910b": 8, "ascend910c": 16}  # cpu runs one-device transformers engines: no TP to split


@st.composite
def shapes(draw):
    profile = draw(st.sampled_from(sorted(PER_NODE)))
    return {
        "profile": profile,
        "mode": draw(st.sampled_from(["both", "train", "explore", "colocate"])),
        "node_num": draw(st.integers(1, 4)),
        "gpu_per_node": draw(st.integers(1, PER_NODE[profile])),
        "engine_num": draw(st.integers(1, 8)),
        "tp": draw(st.sampled_from([1, 2, 3, 4, 8, 16])),
        "pp": draw(st.sampled_from([1, 2])),
    }


def resolve_shape(minimal_file, s):
    overrides = (
        f"hardware={s['profile']}",
        f"mode={s['mode']}",
        f"cluster.node_num={s['node_num']}",
        f"cluster.gpu_per_node={s['gpu_per_node']}",
        f"explorer.rollout_model.engine_num={s['engine_num']}",
        f"explorer.rollout_model.tensor_parallel_size={s['tp']}",
        f"explorer.rollout_model.pipeline_parallel_size={s['pp']}",
    )
    return resolve(Request(minimal_file, overrides))


def possible(s) -> bool:
    """The split rules, restated: an engine fits a node or fills whole nodes; what is left to the trainer does too."""
    per_node, total, per_engine = s["gpu_per_node"], s["node_num"] * s["gpu_per_node"], s["tp"] * s["pp"]
    if s["mode"] == "train":
        return True
    rollout = s["engine_num"] * per_engine
    whole = per_engine <= per_node or per_engine % per_node == 0
    if s["mode"] in ("explore", "colocate"):
        return whole and rollout <= total
    trainer = total - rollout
    return whole and trainer > 0 and (trainer <= per_node or trainer % per_node == 0)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(s=shapes())
def test_every_device_is_counted_once(minimal_file, s):
    try:
        cluster = resolve_shape(minimal_file, s).config.cluster
    except ConfigError as exc:
        assert not possible(s), exc.report()
        assert all(
            "engine_num" in i.key or "tensor_parallel_size" in i.key for i in exc.issues if i.severity == "error"
        ), exc.report()
        return
    assert possible(s)
    per_engine = s["tp"] * s["pp"]
    assert cluster.total_gpu_num == s["node_num"] * s["gpu_per_node"]
    assert cluster.rollout_gpu_num == (0 if s["mode"] == "train" else s["engine_num"] * per_engine)
    if s["mode"] == "both":  # devices conserved: rollout and trainer share the cluster exactly
        assert (
            cluster.rollout_gpu_num + cluster.trainer_gpu_num == cluster.total_gpu_num and cluster.trainer_gpu_num > 0
        )
    elif s["mode"] in ("train", "colocate"):
        assert cluster.trainer_gpu_num == cluster.total_gpu_num
    else:
        assert cluster.trainer_gpu_num == 0 and cluster.rollout_gpu_num <= cluster.total_gpu_num
    # the trainer fits one node or fills whole nodes, never more nodes than there are
    assert cluster.trainer_node_num * cluster.trainer_gpu_num_per_node == cluster.trainer_gpu_num
    assert cluster.trainer_gpu_num_per_node <= cluster.gpu_per_node and cluster.trainer_node_num <= cluster.node_num
    assert cluster.trainer_node_num <= 1 or cluster.trainer_gpu_num_per_node == cluster.gpu_per_node
