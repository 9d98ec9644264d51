"""Small user functions for state descriptors: an aggregate and a reduce function."""

from flowray.datastream.functions import AggregateFunction, ReduceFunction


class Average(AggregateFunction):
    """The mean of the values added; the accumulator is ``(sum, count)``."""

    def create_accumulator(self):
        return (0, 0)

    def add(self, value, acc):
        return (acc[0] + value, acc[1] + 1)

    def get_result(self, acc):
        return acc[0] / acc[1]


class Max(ReduceFunction):
    def reduce(self, a, b):
        return max(a, b)
