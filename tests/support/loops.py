"""Jobs with a loop, for the iteration tests: Collatz steps and connected components by
label propagation, with their plain-Python references."""

from __future__ import annotations

import random
from typing import Dict, List, Tuple

from flowray import KeyedProcessFunction, ValueStateDescriptor
from flowray.common.typeinfo import Types


def collatz_step(record: Tuple[int, int, int]) -> Tuple[int, int, int]:
    """``(start, n, steps)`` one Collatz step further."""
    start, n, steps = record
    return start, (n // 2 if n % 2 == 0 else 3 * n + 1), steps + 1


def collatz_steps(n: int) -> int:
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def random_graph(vertices: int, edges: int, seed: int) -> Dict[int, List[int]]:
    """An undirected graph as adjacency lists (self-loops left out)."""
    rng = random.Random(seed)
    adjacency: Dict[int, List[int]] = {v: [] for v in range(vertices)}
    for _ in range(edges):
        a, b = rng.randrange(vertices), rng.randrange(vertices)
        if a != b:
            adjacency[a].append(b)
            adjacency[b].append(a)
    return adjacency


def components(adjacency: Dict[int, List[int]]) -> Dict[int, int]:
    """Each vertex's component, named by its smallest vertex (a plain search)."""
    label: Dict[int, int] = {}
    for v in sorted(adjacency):
        if v in label:
            continue
        todo, label[v] = [v], v
        while todo:
            for n in adjacency[todo.pop()]:
                if n not in label:
                    label[n] = v
                    todo.append(n)
    return label


class MinLabel(KeyedProcessFunction):
    """Keeps the smallest label seen for its vertex; a smaller one goes out
    (``("out", vertex, label)``) and to the neighbours (``("loop", neighbour, label)``)."""

    def __init__(self, adjacency: Dict[int, List[int]]) -> None:
        self.adjacency = adjacency

    def open(self, runtime_context):
        self.label = runtime_context.get_state(ValueStateDescriptor("label", Types.INT()))

    def process_element(self, value, ctx):
        vertex, label = value
        current = self.label.value()
        if current is None or label < current:
            self.label.update(label)
            yield "out", vertex, label
            for n in self.adjacency[vertex]:
                yield "loop", n, label


def check_label_updates(updates: List[Tuple[int, int]], adjacency) -> None:
    """Each vertex's labels, in the order they were made, strictly decrease (an update
    repeated, say after a failover, would break it) and end at its component's smallest
    vertex (a lost one would leave a larger label)."""
    last: Dict[int, int] = {}
    for vertex, label in updates:
        assert label < last.get(vertex, float("inf")), f"vertex {vertex}: label {label} again"
        last[vertex] = label
    assert last == components(adjacency)
