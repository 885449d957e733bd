"""The part compressor: incompressible runs stored in raw zstd blocks, the rest compressed;
the result is one stream that stock ``zstd -dc`` decodes."""

import os
import random
import shutil
import subprocess

import pytest

from vacate.archive import compress


def _stream(writes):
    out = []

    def take(data):
        out.extend(data if isinstance(data, tuple) else (data,))
    c = compress.LibraryCompressor(take, 3, -1)
    for w in writes:
        c.write(w)
    c.close()
    return b"".join(out)


@pytest.mark.skipif(shutil.which("zstd") is None, reason="needs the zstd command")
def test_mixed_stream_decodes_with_stock_zstd(tmp_path):
    rnd = random.Random(5)
    text = b"".join(b'{"id": %d, "text": "eagle draft token"}\n' % i for i in range(40000))
    writes = [b"h" * 1536, os.urandom(1 << 20), b"\0" * 300, os.urandom(700_000), text,
              b"x" * 40, rnd.randbytes(3 << 20), b"p" * 512, text[:100_000], b"\0" * 1024]
    blob = _stream(writes)
    f = tmp_path / "p.zst"
    f.write_bytes(blob)
    r = subprocess.run(["zstd", "-dc", str(f)], capture_output=True, check=True)
    assert r.stdout == b"".join(writes)
    # the JSON is still compressed: far smaller than the input
    random_bytes = (1 << 20) + 700_000 + (3 << 20)
    assert len(blob) < random_bytes + len(text) // 5


def test_incompressible_data_costs_under_one_percent():
    data = os.urandom(8 << 20)
    blob = _stream([data[i:i + (1 << 20)] for i in range(0, len(data), 1 << 20)])
    assert len(data) <= len(blob) < len(data) * 1.01
