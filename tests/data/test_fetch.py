"""``distlearn data fetch`` against a local HTTP server (127.0.0.1): verified downloads, idempotent
reruns, one-line refusals that leave no file, and deadlines on a server that never answers.

The files served are small fakes; their checksums are pinned by replacing the data set's entry in
``DATASETS`` for the test (the check itself is the production code's, unchanged).
"""

from __future__ import annotations

import gzip
import hashlib
import http.server
import socket
import threading
import time
from pathlib import Path

import pytest

from distlearn.cli import main
from distlearn.data import fetch as F
from distlearn.data import public

UCI_LINES = b"T,2,8,3,5,1,8,13,0,6,6,10,8,0,8,0,8\nA,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1\nZ,15,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0\n"
# the svmlight file the experiments read: A..Z = 1..26, 1-based indices, zero features left out
SVM_LINES = "20 1:2 2:8 3:3 4:5 5:1 6:8 7:13 9:6 10:6 11:10 12:8 14:8 16:8\n1 16:1\n26 1:15\n"
FASHION = {name: gzip.compress(name.encode() * 50, mtime=0) for name in public.FASHION_FILES}


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


class Server:
    """A threaded HTTP server on 127.0.0.1 serving ``files`` (path -> bytes), counting requests."""

    def __init__(self, files: dict[str, bytes], *, trickle: bool = False) -> None:
        self.files, self.hits = files, []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                outer.hits.append(self.path)
                body = outer.files.get(self.path.rsplit("/", 1)[-1])
                if body is None:
                    self.send_error(404, "Not Found")
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    for i in range(len(body)):  # one byte at a time, slowly, when trickling
                        self.wfile.write(body[i:i + 1] if trickle else body[i:])
                        if not trickle:
                            break
                        self.wfile.flush()
                        time.sleep(0.05)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/files"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def pinned(monkeypatch):
    """Pin the fake files' checksums (the test-only override of the real pins)."""
    monkeypatch.setitem(F.DATASETS, "letter", F.DataSet(
        "letter", "fake LETTER", (F.Remote("letter-recognition.data", "https://invalid.example/l", len(UCI_LINES),
                                           sha(UCI_LINES)),), derived=("letter.svm", sha(SVM_LINES.encode()))))
    monkeypatch.setitem(F.DATASETS, "fashion-mnist", F.DataSet(
        "fashion-mnist", "fake Fashion-MNIST",
        tuple(F.Remote(n, f"https://invalid.example/{n}", len(b), sha(b)) for n, b in FASHION.items())))


@pytest.fixture
def server():
    s = Server({"letter-recognition.data": UCI_LINES, **FASHION})
    yield s
    s.close()


def leftovers(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())


def test_fetch_verifies_converts_and_is_idempotent(pinned, server, tmp_path, monkeypatch):
    r = F.fetch("letter", tmp_path, base_url=server.url)
    assert r["files"]["letter-recognition.data"]["status"] == "downloaded"
    assert (tmp_path / "letter" / "letter-recognition.data").read_bytes() == UCI_LINES
    assert (tmp_path / "letter" / "letter.svm").read_text() == SVM_LINES
    assert r["path"] == str(tmp_path / "letter" / "letter.svm")
    f = F.fetch("fashion-mnist", tmp_path, base_url=server.url)
    assert {n: (tmp_path / "fashion-mnist" / n).read_bytes() for n in FASHION} == FASHION
    assert leftovers(tmp_path) == sorted([f"fashion-mnist/{n}" for n in FASHION]
                                         + ["letter/letter-recognition.data", "letter/letter.svm"])
    assert len(server.hits) == 5 and f["path"] == str(tmp_path / "fashion-mnist")
    # a rerun verifies what is there and asks the network for nothing
    again = F.fetch("letter", tmp_path, base_url=server.url)
    assert {v["status"] for v in again["files"].values()} == {"present"} and len(server.hits) == 5
    # a file lost since is fetched alone
    (tmp_path / "fashion-mnist" / "t10k-labels-idx1-ubyte.gz").unlink()
    F.fetch("fashion-mnist", tmp_path, base_url=server.url)
    assert server.hits[5:] == ["/files/t10k-labels-idx1-ubyte.gz"]
    # the experiments find the cache with no variable but $DISTLEARN_DATA (here: the test's cache root) ...
    monkeypatch.setenv("DISTLEARN_DATA", str(tmp_path))
    monkeypatch.delenv("DISTLEARN_LETTER", raising=False)
    monkeypatch.delenv("DISTLEARN_FASHION_MNIST", raising=False)
    assert public.letter_file() == tmp_path / "letter" / "letter.svm"
    assert public.fashion_mnist_dir() == tmp_path / "fashion-mnist"
    # ... and the per-set variables still win
    monkeypatch.setenv("DISTLEARN_LETTER", "/elsewhere/letter.svm")
    monkeypatch.setenv("DISTLEARN_FASHION_MNIST", "/elsewhere/fashion")
    assert public.letter_file() == Path("/elsewhere/letter.svm")
    assert public.fashion_mnist_dir() == Path("/elsewhere/fashion")


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("DISTLEARN_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert F.cache_dir() == tmp_path / "distlearn" / "data"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert F.cache_dir() == Path.home() / ".cache" / "distlearn" / "data"


def test_checksum_mismatch_is_refused_and_nothing_is_left(pinned, tmp_path):
    bad = Server({"letter-recognition.data": UCI_LINES.replace(b"T,", b"U,"), **FASHION})
    try:
        with pytest.raises(ValueError, match=r"GET http://127\.0\.0\.1:\d+/files/letter-recognition\.data: .*SHA-256"):
            F.fetch("letter", tmp_path, base_url=bad.url)
    finally:
        bad.close()
    assert leftovers(tmp_path) == []


def test_http_error_names_the_url_and_leaves_nothing(pinned, tmp_path, capsys):
    empty = Server({})
    try:
        code = main(["data", "fetch", "fashion-mnist", "--dir", str(tmp_path), "--url", empty.url])
    finally:
        empty.close()
    err = capsys.readouterr().err.strip().splitlines()  # not a terminal: no progress line, the error in one line
    assert code == 2 and "Traceback" not in "".join(err) and len(err) == 1, err
    assert err[-1] == f"distlearn data: error: GET {empty.url}/train-images-idx3-ubyte.gz: HTTP 404 Not Found"
    assert leftovers(tmp_path) == []
    assert list(tmp_path.iterdir()) == []  # the data set's directory it made is removed again; --dir itself stays
    new = tmp_path / "a" / "b"  # directories fetch made for --dir go too (nothing of anyone else's is in them)
    empty = Server({})
    try:
        assert main(["data", "fetch", "letter", "--dir", str(new), "--url", empty.url]) == 2
    finally:
        empty.close()
    assert tmp_path.is_dir() and list(tmp_path.iterdir()) == []


@pytest.mark.timeout(60)  # the wait must end by the 0.3 s deadline; this only stops a hang
def test_a_server_that_never_answers_hits_the_deadline(pinned, tmp_path, capsys):
    mute = socket.socket()
    mute.bind(("127.0.0.1", 0))
    mute.listen(8)  # connections are queued, never accepted nor answered
    url = f"http://127.0.0.1:{mute.getsockname()[1]}"
    try:
        code = main(["data", "fetch", "letter", "--dir", str(tmp_path), "--url", url, "--timeout", "0.3"])
    finally:
        mute.close()
    err = capsys.readouterr().err.strip()
    assert code == 2 and f"GET {url}/letter-recognition.data: no answer within 0.3 s" in err, err
    assert leftovers(tmp_path) == []


def test_a_trickling_server_hits_the_whole_file_deadline(pinned, tmp_path):
    slow = Server({"letter-recognition.data": UCI_LINES}, trickle=True)
    try:
        with pytest.raises(ConnectionError, match="not complete within the deadline of 0.3 s"):
            F.fetch("letter", tmp_path, base_url=slow.url, timeout=5, deadline=0.3)
    finally:
        slow.close()
    assert leftovers(tmp_path) == []


def test_a_foreign_file_is_not_replaced(pinned, server, tmp_path):
    (tmp_path / "letter").mkdir()
    mine = tmp_path / "letter" / "letter-recognition.data"
    mine.write_bytes(b"my own notes\n")
    with pytest.raises(FileExistsError, match="not ours to replace"):
        F.fetch("letter", tmp_path, base_url=server.url)
    assert mine.read_bytes() == b"my own notes\n" and server.hits == []


def test_cli_prints_where_the_data_is(pinned, server, tmp_path, capsys):
    assert main(["data", "fetch", "letter", "fashion-mnist", "--dir", str(tmp_path), "--url", server.url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"letter: {tmp_path / 'letter' / 'letter.svm'} (downloaded, derived)",
                   f"fashion-mnist: {tmp_path / 'fashion-mnist'} (downloaded)"]


def test_the_real_pins_are_well_formed():
    for ds in F.DATASETS.values():
        for r in ds.files:
            assert len(r.sha256) == 64 and int(r.sha256, 16) >= 0 and r.size > 0
            assert r.url.startswith("https://") and r.url.endswith("/" + r.name)
    assert [r.name for r in F.DATASETS["fashion-mnist"].files] == list(public.FASHION_FILES)


def test_bad_uci_line_is_one_error_with_its_line(tmp_path):
    src = tmp_path / "l.data"
    src.write_text("A,1,2\n")
    with pytest.raises(ValueError, match=r"l\.data:1: expected a letter A\.\.Z and 16 integers"):
        F.letter_to_svmlight(src, tmp_path / "l.svm")
