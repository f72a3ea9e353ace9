"""The output cap, printable text and the end-marker scanner (no Docker needed)."""

from __future__ import annotations

import pytest

from mol.core.errors import PathEscape
from mol.sandboxes.files import confine, inside
from mol.sandboxes.output import OutputCap, printable
from mol.sandboxes.stream import MarkerScanner


def test_cap_keeps_everything_that_fits() -> None:
    cap = OutputCap(100)
    cap.feed(b"hello\n")
    cap.feed(b"world\n")
    assert cap.text() == "hello\nworld\n"
    assert cap.dropped == 0 and cap.total == 12


def test_cap_keeps_head_and_tail_and_says_how_much_was_dropped() -> None:
    cap = OutputCap(1024)
    for index in range(1000):
        cap.feed(f"line {index:04d}\n".encode())
    text = cap.text()
    assert text.startswith("line 0000\n")
    assert text.endswith("line 0999\n")
    assert cap.dropped == 10_000 - 1024
    assert f"[... {cap.dropped} bytes dropped ...]" in text
    assert "line 0500" not in text


def test_cap_memory_stays_bounded_for_a_huge_stream() -> None:
    cap = OutputCap(4096)
    chunk = b"x" * 65536
    for _ in range(2000):  # 128 MiB without a newline
        cap.feed(chunk)
        assert len(cap._head) + len(cap._tail) <= 2 * 4096 + len(chunk)
    assert cap.total == 2000 * 65536
    assert len(cap.text()) < 4096 + 100


def test_binary_becomes_printable() -> None:
    text = printable(bytes([0, 1, 7, 27]) + b"[31mred\x1b[0m ok\r\n\xff\xfe tab\there")
    assert text == "\\x00\\x01\\x07red ok\n\\xff\\xfe tab\there"
    assert printable("héllo ✓".encode()) == "héllo ✓"


def feed_all(scanner: MarkerScanner, chunks: list[bytes]) -> tuple[bytes, str | None]:
    seen = bytearray()
    scanner.sink = seen.extend
    word = None
    for chunk in chunks:
        word = scanner.feed(chunk)
        if word is not None:
            break
    return bytes(seen), word


@pytest.mark.parametrize("split", [1, 2, 3, 5, 7, 11, 100])
def test_marker_found_across_any_chunk_boundary(split: int) -> None:
    stream = b"some output without newline__mol_abc_0 5\nlater"
    chunks = [stream[i:i + split] for i in range(0, len(stream), split)]
    output, word = feed_all(MarkerScanner(b"__mol_abc_"), chunks)
    assert output == b"some output without newline"
    assert word == "0 5"


def test_prefix_without_a_marker_line_is_plain_output() -> None:
    scanner = MarkerScanner(b"__mol_abc_")
    output, word = feed_all(scanner, [b"a __mol_abc_" + b"y" * 100 + b"\n", b"__mol_abc_3 1\n"])
    assert word == "3 1"
    assert output == b"a __mol_abc_" + b"y" * 100 + b"\n"


def test_bytes_after_the_marker_wait_for_the_next_command() -> None:
    scanner = MarkerScanner(b"__mol_abc_")
    _, word = feed_all(scanner, [b"one__mol_abc_0 1\nlate"])
    assert word == "0 1"
    output, word = feed_all(scanner, [b" two__mol_abc_1 1\n"])
    assert output == b"late two" and word == "1 1"


def test_paths_are_confined_to_the_workspace() -> None:
    assert confine("/workspace", "a/b.txt") == ["a", "b.txt"]
    assert confine("/workspace", "/workspace/a/./b") == ["a", "b"]
    assert confine("/workspace", ".") == []
    for bad in ["../etc/passwd", "a/../../x", "/etc/passwd", "/workspace/../etc", "/workspaces/x",
                "a\0b"]:
        with pytest.raises(PathEscape):
            confine("/workspace", bad)
    assert inside("/workspace", "/workspace/a") and not inside("/workspace", "/workspace2")
