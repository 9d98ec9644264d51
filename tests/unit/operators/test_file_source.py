"""FileSource (text lines): enumeration, round-robin assignment, exact restore by byte offset."""

import pickle
from pathlib import Path

import cloudpickle
import pytest

from flowray.datastream.connectors._file_source_facade import (
    FileSource,
    FileSourceBuilder,
    StreamFormat,
)
from flowray.operators.sources import Boundedness, SourceReaderContext
from tests.support.environments import local_env


def build(*paths, charset=None):
    fmt = StreamFormat.text_line_format() if charset is None else \
        StreamFormat.text_line_format(charset)
    return FileSource.for_record_stream_format(fmt, *[str(p) for p in paths]).build()


def drain(reader, max_records=100):
    out = []
    while (batch := reader.poll_next(max_records)) is not None:
        out.extend(batch)
    reader.close()
    return out


def read_all(source, parallelism=1, max_records=100):
    return [drain(source.create_reader(SourceReaderContext(i, parallelism)), max_records)
            for i in range(parallelism)]


def write(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


@pytest.fixture
def files(tmp_path):
    """Three files with tricky lines: blank lines, spaces, no final newline, an empty file."""
    d = tmp_path / "in"
    write(d / "a.txt", "alpha\n\n  spaced  \nlast-no-newline")
    write(d / "b.txt", "")
    write(d / "c.txt", "c1\nc2\n")
    write(d / "d.txt", "\n")
    write(d / "e.txt", "é ünï\n日本語\n🙂")
    return d


EXPECTED = {
    "a.txt": ["alpha", "", "  spaced  ", "last-no-newline"],
    "b.txt": [],
    "c.txt": ["c1", "c2"],
    "d.txt": [""],
    "e.txt": ["é ünï", "日本語", "🙂"],
}


def test_pyflink_shape(files):
    builder = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(files))
    assert isinstance(builder, FileSourceBuilder)
    assert builder.process_static_file_set() is builder
    source = builder.build()
    assert source.get_boundedness() is Boundedness.BOUNDED
    assert source.files == sorted(str(files / n) for n in EXPECTED)


def test_directory_reads_every_line_once(files):
    assert read_all(build(files)) == [sum(EXPECTED.values(), [])]


@pytest.mark.parametrize("max_records", [1, 2, 3, 1000])
def test_batch_sizes(files, max_records):
    assert read_all(build(files), max_records=max_records) == [sum(EXPECTED.values(), [])]


@pytest.mark.parametrize("parallelism", [2, 3])
def test_files_are_dealt_round_robin(files, parallelism):
    names = sorted(EXPECTED)
    shares = read_all(build(files), parallelism)
    for i, share in enumerate(shares):
        assert share == sum((EXPECTED[n] for n in names[i::parallelism]), [])


def test_more_subtasks_than_files(tmp_path):
    f = write(tmp_path / "only.txt", "x\ny\n")
    assert read_all(build(f), 3) == [["x", "y"], [], []]


def test_restore_at_every_position(files):
    """Snapshot after every poll; a fresh reader restored there reads exactly the rest."""
    source = build(files)
    for parallelism in (1, 2):
        for i in range(parallelism):
            context = SourceReaderContext(i, parallelism)
            expected = drain(source.create_reader(context))
            for max_records in (1, 2, 3):
                reader = source.create_reader(context)
                seen = []
                positions = []
                while True:
                    position = reader.snapshot_state()
                    positions.append(position)
                    copy = pickle.loads(pickle.dumps(source))
                    fresh = copy.create_reader(context)
                    fresh.restore_state(pickle.loads(pickle.dumps(position)))
                    assert seen + drain(fresh, max_records) == expected, (position, max_records)
                    batch = reader.poll_next(max_records)
                    if batch is None:
                        break
                    seen.extend(batch)
                assert seen == expected
                reader.close()


def test_restore_seeks_without_rereading(tmp_path, monkeypatch):
    f = write(tmp_path / "f.txt", "one\ntwo\nthree\n")
    source = build(f)
    reader = source.create_reader(SourceReaderContext(0, 1))
    assert reader.poll_next(1) == ["one"]
    assert reader.snapshot_state() == (0, 4)
    assert reader.poll_next(1) == ["two"]
    assert reader.snapshot_state() == (0, 8)
    reader.close()
    # the offset is exact even if the file's earlier bytes are now unreadable garbage
    write(f, b"\xff\xff\xff\n\xff\xff\xff\nthree\n")
    fresh = source.create_reader(SourceReaderContext(0, 1))
    fresh.restore_state([0, 8])  # a list (e.g. after a serializer's round trip) also works
    assert drain(fresh) == ["three"]


def test_position_moves_to_next_file(tmp_path):
    write(tmp_path / "1.txt", "a\n")
    write(tmp_path / "2.txt", "b\n")
    reader = build(tmp_path).create_reader(SourceReaderContext(0, 1))
    assert reader.poll_next(2) == ["a", "b"]
    assert reader.poll_next(2) is None
    assert reader.snapshot_state() == (2, 0)
    fresh = build(tmp_path).create_reader(SourceReaderContext(0, 1))
    fresh.restore_state((2, 0))
    assert fresh.poll_next(5) is None


def test_restore_out_of_range_is_an_error(tmp_path):
    reader = build(write(tmp_path / "x", "a")).create_reader(SourceReaderContext(0, 1))
    with pytest.raises(ValueError):
        reader.restore_state((2, 0))
    with pytest.raises(ValueError):
        reader.restore_state((0, -1))


def test_hidden_files_and_subdirectories_are_skipped(tmp_path):
    write(tmp_path / "visible.txt", "v\n")
    write(tmp_path / ".hidden", "h\n")
    write(tmp_path / "sub" / "nested.txt", "n\n")
    source = build(tmp_path)
    assert source.files == [str(tmp_path / "visible.txt")]
    assert read_all(source) == [["v"]]
    # a hidden file named explicitly is read
    assert read_all(build(tmp_path / ".hidden")) == [["h"]]


def test_several_paths_sorted_and_deduplicated(tmp_path):
    b = write(tmp_path / "d" / "b.txt", "b\n")
    a = write(tmp_path / "a.txt", "a\n")
    source = build(b, tmp_path / "d", a)
    assert source.files == [str(a), str(b)]
    assert read_all(source) == [["a", "b"]]


def test_file_uri(tmp_path):
    f = write(tmp_path / "with space.txt", "x\ny")
    assert read_all(build(f.as_uri())) == [["x", "y"]]
    assert read_all(build(tmp_path.as_uri())) == [["x", "y"]]


def test_missing_path_and_bad_scheme(tmp_path):
    with pytest.raises(FileNotFoundError):
        build(tmp_path / "nope")
    with pytest.raises(ValueError):
        build("s3://bucket/key")
    with pytest.raises(ValueError):
        FileSource.for_record_stream_format(StreamFormat.text_line_format())
    with pytest.raises(NotImplementedError):
        FileSource.for_record_stream_format(
            StreamFormat.text_line_format(), str(tmp_path)).monitor_continuously(1)


def test_only_empty_files(tmp_path):
    write(tmp_path / "e1", "")
    write(tmp_path / "e2", "")
    reader = build(tmp_path).create_reader(SourceReaderContext(0, 1))
    assert reader.poll_next(10) is None


def test_crlf_and_other_whitespace(tmp_path):
    f = write(tmp_path / "w.txt", "a\r\n\tb \r\nc\rd\n  \n")
    assert read_all(build(f)) == [["a", "\tb ", "c\rd", "  "]]


def test_charset(tmp_path):
    f = write(tmp_path / "latin.txt", "café\nnaïve\n".encode("latin-1"))
    assert read_all(build(f, charset="ISO-8859-1")) == [["café", "naïve"]]
    with pytest.raises(UnicodeDecodeError):
        read_all(build(f))
    with pytest.raises(ValueError):
        StreamFormat.text_line_format("UTF-16")
    with pytest.raises(ValueError):
        StreamFormat.text_line_format("no-such-charset")


def test_source_is_picklable_with_cloudpickle(files):
    copy = cloudpickle.loads(cloudpickle.dumps(build(files)))
    assert read_all(copy, 2) == read_all(build(files), 2)


def test_local_job_reads_files(files):
    from flowray import WatermarkStrategy

    env = local_env(2)
    source = FileSource.for_record_stream_format(
        StreamFormat.text_line_format(), str(files)).build()
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "file-source")
    assert sorted(stream.execute_and_collect()) == sorted(sum(EXPECTED.values(), []))
