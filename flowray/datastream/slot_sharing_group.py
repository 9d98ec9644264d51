"""As ``pyflink.datastream.slot_sharing_group``: ``SlotSharingGroup`` and ``MemorySize``.

flowray has no slots: every subtask is a Ray actor of its own. The resources a group
declares are what each task actor of the group's operators asks Ray for
(:func:`ray_actor_resources`): CPU cores -> ``num_cpus``, task heap + off-heap + managed
memory -> ``memory``, external resource ``gpu`` -> ``num_gpus``, any other -> a Ray custom
resource of that name. As in Flink, only operators of one group are chained together, and an
operator without a group takes its inputs' group (``"default"`` when they differ).

>>> g = SlotSharingGroup.builder("heavy").set_cpu_cores(1.5).set_task_heap_memory_mb(512).build()
>>> g.get_name(), g.get_cpu_cores(), g.get_task_heap_memory().get_mebi_bytes()
('heavy', 1.5, 512)
"""

from __future__ import annotations

from typing import Dict, Optional

from flowray.common.compat import not_implemented

__all__ = ["SlotSharingGroup", "MemorySize", "ray_actor_resources"]

_MB = 1 << 20


class MemorySize:
    """An amount of memory in bytes."""

    def __init__(self, j_memory_size: None = None, bytes_size: Optional[int] = None) -> None:
        if j_memory_size is not None:
            raise NotImplementedError("MemorySize(j_memory_size) wraps a Java object and is not "
                                      "implemented in flowray; instead: "
                                      "MemorySize(bytes_size=n) or MemorySize.of_mebi_bytes(n)")
        if not isinstance(bytes_size, int) or bytes_size < 0:
            raise ValueError(f"MemorySize needs a non-negative bytes_size, got {bytes_size!r}")
        self._bytes = bytes_size

    @staticmethod
    def of_mebi_bytes(mebi_bytes: int) -> "MemorySize":
        return MemorySize(bytes_size=int(mebi_bytes) * _MB)

    def get_bytes(self) -> int:
        return self._bytes

    def get_kibi_bytes(self) -> int:
        return self._bytes >> 10

    def get_mebi_bytes(self) -> int:
        return self._bytes >> 20

    def get_gibi_bytes(self) -> int:
        return self._bytes >> 30

    def get_tebi_bytes(self) -> int:
        return self._bytes >> 40

    get_java_memory_size = not_implemented("MemorySize.get_java_memory_size",
                                           "get_bytes(): flowray runs no JVM")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemorySize) and other._bytes == self._bytes

    def __hash__(self) -> int:
        return hash(self._bytes)

    def __repr__(self) -> str:
        return f"MemorySize({self._bytes} bytes)"


class SlotSharingGroup:
    """A named group with optional resources (see the module doc: the resources are kept,
    not applied). Build with ``SlotSharingGroup.builder(name)...build()``."""

    def __init__(self, j_slot_sharing_group: Optional[str] = None, *,
                 cpu_cores: Optional[float] = None,
                 task_heap_memory: Optional[MemorySize] = None,
                 task_off_heap_memory: Optional[MemorySize] = None,
                 managed_memory: Optional[MemorySize] = None,
                 external_resources: Optional[Dict[str, float]] = None) -> None:
        # PyFlink passes a Java object here; flowray's builder passes the group's name
        if not isinstance(j_slot_sharing_group, str) or not j_slot_sharing_group:
            raise ValueError("a SlotSharingGroup needs a name: use "
                             "SlotSharingGroup.builder(name)...build()")
        self._name = j_slot_sharing_group
        self._cpu_cores = cpu_cores
        self._task_heap = task_heap_memory
        self._task_off_heap = task_off_heap_memory
        self._managed = managed_memory
        self._external = dict(external_resources or {})

    @staticmethod
    def builder(name: str) -> "SlotSharingGroup.Builder":
        return SlotSharingGroup.Builder(name)

    def get_name(self) -> str:
        return self._name

    def get_cpu_cores(self) -> Optional[float]:
        return self._cpu_cores

    def get_task_heap_memory(self) -> Optional[MemorySize]:
        return self._task_heap

    def get_task_off_heap_memory(self) -> Optional[MemorySize]:
        return self._task_off_heap

    def get_managed_memory(self) -> Optional[MemorySize]:
        return self._managed

    def get_external_resources(self) -> Dict[str, float]:
        return dict(self._external)

    def has_resources(self) -> bool:
        """Whether the group declares any resource."""
        return any(v is not None for v in (self._cpu_cores, self._task_heap,
                                           self._task_off_heap, self._managed)) \
            or bool(self._external)

    get_java_slot_sharing_group = not_implemented(
        "SlotSharingGroup.get_java_slot_sharing_group", "get_name(): flowray runs no JVM")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SlotSharingGroup) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash(self._name)

    def __repr__(self) -> str:
        resources = ray_actor_resources(self)
        return f"SlotSharingGroup({self._name!r}{', ' if resources else ''}" + \
            ", ".join(f"{k}={v!r}" for k, v in resources.items()) + ")"

    class Builder:
        """Collects a group's name and resources; ``build()`` makes the group."""

        def __init__(self, j_builder: str) -> None:
            self._name = j_builder
            self._values: Dict[str, object] = {}
            self._external: Dict[str, float] = {}

        def set_cpu_cores(self, cpu_cores: float) -> "SlotSharingGroup.Builder":
            if cpu_cores <= 0:
                raise ValueError(f"cpu_cores must be positive, got {cpu_cores!r}")
            self._values["cpu_cores"] = float(cpu_cores)
            return self

        def set_task_heap_memory(self, task_heap_memory: MemorySize
                                 ) -> "SlotSharingGroup.Builder":
            self._values["task_heap_memory"] = task_heap_memory
            return self

        def set_task_heap_memory_mb(self, task_heap_memory_mb: int
                                    ) -> "SlotSharingGroup.Builder":
            return self.set_task_heap_memory(MemorySize.of_mebi_bytes(task_heap_memory_mb))

        def set_task_off_heap_memory(self, task_off_heap_memory: MemorySize
                                     ) -> "SlotSharingGroup.Builder":
            self._values["task_off_heap_memory"] = task_off_heap_memory
            return self

        def set_task_off_heap_memory_mb(self, task_off_heap_memory_mb: int
                                        ) -> "SlotSharingGroup.Builder":
            return self.set_task_off_heap_memory(
                MemorySize.of_mebi_bytes(task_off_heap_memory_mb))

        def set_managed_memory(self, managed_memory: MemorySize) -> "SlotSharingGroup.Builder":
            self._values["managed_memory"] = managed_memory
            return self

        def set_managed_memory_mb(self, managed_memory_mb: int) -> "SlotSharingGroup.Builder":
            return self.set_managed_memory(MemorySize.of_mebi_bytes(managed_memory_mb))

        def set_external_resource(self, name: str, value: float) -> "SlotSharingGroup.Builder":
            self._external[name] = float(value)
            return self

        def build(self) -> "SlotSharingGroup":
            return SlotSharingGroup(self._name, external_resources=self._external,
                                    **self._values)  # type: ignore[arg-type]


def ray_actor_resources(group: SlotSharingGroup) -> Dict[str, object]:
    """The Ray actor options asking for ``group``'s resources (empty: none declared).

    >>> g = SlotSharingGroup.builder("gpu").set_cpu_cores(2).set_task_heap_memory_mb(100) \\
    ...     .set_external_resource("gpu", 1).set_external_resource("tpu", 4).build()
    >>> ray_actor_resources(g)
    {'num_cpus': 2.0, 'memory': 104857600, 'num_gpus': 1.0, 'resources': {'tpu': 4.0}}
    """
    options: Dict[str, object] = {}
    if group.get_cpu_cores() is not None:
        options["num_cpus"] = float(group.get_cpu_cores())  # type: ignore[arg-type]
    memory = sum(m.get_bytes() for m in (group.get_task_heap_memory(),
                                         group.get_task_off_heap_memory(),
                                         group.get_managed_memory()) if m is not None)
    if memory:
        options["memory"] = memory
    custom: Dict[str, float] = {}
    for name, amount in group.get_external_resources().items():
        if name.lower() == "gpu":
            options["num_gpus"] = float(amount)
        else:
            custom[name] = float(amount)
    if custom:
        options["resources"] = custom
    return options
