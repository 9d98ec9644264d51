"""Word count and a keyed running sum on an embedded local Ray: the main example.

Run: ``make run`` (or ``python examples/word_count.py``).
"""

from flowray import Configuration, StreamExecutionEnvironment
from flowray.datastream.connectors.number_seq import NumberSequenceSource

TEXT = [
    "To be, or not to be, that is the question:",
    "Whether 'tis nobler in the mind to suffer",
    "The slings and arrows of outrageous fortune,",
    "Or to take arms against a sea of troubles",
    "And by opposing end them.",
]


def main() -> None:
    config = Configuration().set_string("parallelism.default", "2")
    env = StreamExecutionEnvironment.get_execution_environment(config)

    words = (env.from_collection(TEXT)
             .flat_map(lambda line: (w.strip(",.:'").lower() for w in line.split()))
             .filter(lambda w: w != "")
             .map(lambda w: (w, 1))
             .key_by(lambda t: t[0])
             .sum(1))
    final = {}
    for word, count in words.execute_and_collect("word count"):
        final[word] = count
    top = sorted(final.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    print("top words:", ", ".join(f"{w}={c}" for w, c in top))

    # a keyed running sum over a parallel source, printed by the tasks
    (env.from_source(NumberSequenceSource(1, 1000), source_name="numbers")
     .map(lambda n: (n % 3, n))
     .key_by(lambda t: t[0])
     .reduce(lambda a, b: (a[0], a[1] + b[1]))
     .filter(lambda t: t[1] > 166_000)
     .print())
    env.execute("running sum")  # logs a one-line summary when it ends


if __name__ == "__main__":
    main()
