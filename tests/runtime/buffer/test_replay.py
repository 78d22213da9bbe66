"""The replay buffer (experience_buffer.replay_buffer): the queue served by priority as Trinity-RFT's
AsyncPriorityQueue serves it (buffer/storage/queue.py): the highest priority first, the lowest evicted when full,
a served task queued again after its cooldown, nothing older than the trainer's oldest accepted weights."""

from hypothesis import given
from hypothesis import strategies as st

from trinity.runtime.buffer.replay import ReplayQueue
from trinity.runtime.experience import Experience


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def task(group: str, version: int, size: int = 1) -> list[Experience]:
    return [Experience([1], [2], reward=float(i), group=group, weight_version=version) for i in range(size)]


def served(queue: ReplayQueue, n: int = 1, step: int = 1) -> list[str]:
    return [e.group for e in queue.take(n, step)]


def test_the_freshest_weights_experiences_come_first_and_the_oldest_among_equals():
    queue = ReplayQueue(capacity=10)
    for group, version in (("a", 0), ("b", 2), ("c", 1), ("d", 2)):
        queue.add(task(group, version))
    assert [served(queue)[0] for _ in range(4)] == ["b", "d", "c", "a"]
    assert queue.take(1, 1) == []  # nothing left: the trainer waits


def test_a_full_queue_evicts_its_lowest_priority_for_a_new_task_of_at_least_that_and_drops_a_lower_one():
    queue = ReplayQueue(capacity=2)
    queue.add(task("old", 0) + task("mid", 1))
    queue.add(task("new", 1))  # evicts the lowest, 'old'
    queue.add(task("older", 0))  # lower than everything held: dropped
    queue.add(task("tie", 1))  # as high as the lowest: evicts the oldest of it, 'mid'
    assert len(queue) == 2 and served(queue, 2) == ["new", "tie"]


def test_a_served_task_comes_back_after_its_cooldown_with_its_priority_decayed():
    clock = Clock()
    queue = ReplayQueue(capacity=10, args={"decay": 2.0}, cooldown_s=30.0, clock=clock)
    queue.add(task("fresh", 3))
    assert served(queue) == ["fresh"]
    queue.add(task("older", 2))
    clock.now = 29.9
    assert served(queue) == ["older"] and queue.take(1, 2) == []  # still cooling down
    clock.now = 30.0
    queue.add(task("oldest", 0))
    assert served(queue) == ["fresh"]  # back, at 3 - 2 x 1 = 1, above 'oldest' at 0
    assert served(queue) == ["oldest"]


def test_without_a_cooldown_nothing_is_served_twice():
    queue = ReplayQueue(capacity=10)
    queue.add(task("a", 1, size=3))
    assert len(queue.take(3, 1)) == 3 and queue.take(1, 2) == []


def test_a_batch_may_end_inside_a_task_whose_rest_the_next_batch_takes_first():
    queue = ReplayQueue(capacity=10)
    queue.add(task("a", 1, size=3) + task("b", 0, size=3))
    assert served(queue, 2) == ["a", "a"]
    assert served(queue, 4) == ["a", "b", "b", "b"]


def test_stale_experiences_are_dropped_queued_or_pooled():
    queue = ReplayQueue(capacity=10)
    queue.add(task("v0", 0, size=2) + task("v1", 1) + task("v2", 2))
    assert served(queue, 1) == ["v2"]
    queue.add(task("v0b", 0))
    assert queue.drop_stale(1, step=2) == 3 and served(queue) == ["v1"] and queue.take(1, 3) == []


def test_decay_limit_randomization_stops_queueing_a_task_after_its_use_count_limit():
    clock = Clock()
    args = {"decay": 1.0, "use_count_limit": 2, "sigma": 0.0}
    queue = ReplayQueue(10, "decay_limit_randomization", args, cooldown_s=0.0, clock=clock)
    queue.add(task("a", 5))
    assert [served(queue)[0] for _ in range(2)] == ["a", "a"] and queue.take(1, 3) == []


def test_the_experience_buffer_of_a_config_that_enables_replay_serves_by_priority(tmp_path):
    from trinity.config.schema.buffer import ExperienceBufferConfig
    from trinity.runtime.buffer.actor import ExperienceBuffer

    storage = ExperienceBufferConfig(
        name="e", capacity=2, replay_buffer={"enable": True, "priority_fn_args": {"decay": 2.0}}
    )
    buffer = ExperienceBuffer(name="buffer", role="buffer", storage=storage, run_dir=str(tmp_path))
    assert buffer.setup()["store"] == "ReplayQueue"
    buffer.put(task("a", 0) + task("b", 1) + task("c", 2))
    import asyncio

    assert [e.group for e in asyncio.run(buffer.get(2, 1, timeout_s=1))] == ["c", "b"]


# --- the queue against the definition: the highest priority (the oldest among equals) first; when full, the lowest
# (the oldest among equals) gives way to an item of at least its priority -----------------------------------------

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 5)),
        st.tuples(st.just("take"), st.integers(1, 3)),
        st.tuples(st.just("wait"), st.sampled_from([0.0, 5.0, 10.0])),
        st.tuples(st.just("stale"), st.integers(0, 5)),
    ),
    max_size=40,
)


class Definition:
    """Upstream's semantics written as scans over a list: (priority, arrival, group, version, uses)."""

    def __init__(self, capacity, decay, cooldown):
        self.capacity, self.decay, self.cooldown = capacity, decay, cooldown
        self.items, self.pool, self.cooling, self.arrivals = [], [], [], 0

    def queue(self, group, version, uses):
        priority = version - self.decay * uses
        if len(self.items) >= self.capacity:
            lowest = min(self.items, key=lambda i: (i[0], i[1]))
            if lowest[0] > priority:
                return
            self.items.remove(lowest)
        self.arrivals += 1
        self.items.append((priority, self.arrivals, group, version, uses))

    def take(self, n, now):
        self.requeue(now)
        if len(self.pool) + len(self.items) < n:
            return []
        while len(self.pool) < n:
            best = max(self.items, key=lambda i: (i[0], -i[1]))
            self.items.remove(best)
            self.pool.append(best[2])
            if self.cooldown is not None:
                self.cooling.append((now + self.cooldown, best[2], best[3], best[4] + 1))
        out, self.pool = self.pool[:n], self.pool[n:]
        return out

    def requeue(self, now):
        ready = sorted((c for c in self.cooling if c[0] <= now), key=lambda c: c[0])
        self.cooling = [c for c in self.cooling if c[0] > now]
        for _, group, version, uses in ready:
            self.queue(group, version, uses)

    def stale(self, version, now):
        self.requeue(now)
        self.items = [i for i in self.items if i[3] >= version]
        self.pool = [g for g in self.pool if int(g.split("/")[1]) >= version]


@given(ops=OPS, capacity=st.integers(1, 4), cooldown=st.sampled_from([None, 0.0, 5.0]))
def test_the_queue_serves_and_evicts_as_the_definition_says(ops, capacity, cooldown):
    clock = Clock()
    queue, definition = ReplayQueue(capacity, cooldown_s=cooldown, clock=clock), Definition(capacity, 2.0, cooldown)
    for i, (op, value) in enumerate(ops):
        if op == "add":
            queue.add(task(f"{i}/{value}", value))
            definition.requeue(clock.now)
            definition.queue(f"{i}/{value}", value, 0)
        elif op == "take":
            assert served(queue, value) == definition.take(value, clock.now)
        elif op == "wait":
            clock.now += value
        else:
            queue.drop_stale(value, step=i)
            definition.stale(value, clock.now)
        assert len(queue) <= capacity
