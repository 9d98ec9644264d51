"""Reading keyed state back out of a backend."""

from flowray.state.descriptors import ValueStateDescriptor


def read_values(backend, name="v"):
    """The value state ``name`` of every key ``backend`` holds, as ``{key: value}``."""
    st = backend.get_partitioned_state(ValueStateDescriptor(name))
    out = {}
    for k in backend.get_keys(name):
        backend.set_current_key(k)
        out[k] = st.value()
    return out
