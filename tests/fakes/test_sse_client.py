"""The tests' Server-Sent Events client (tests/api/sse_client.py) against a scripted server: what
it reads from a stream cut off mid-event must be what a browser's EventSource keeps, since the
tests reconnect with its last event ID as an app does."""
import socket
import threading

from sse_client import Stream


def serve_once(chunks):
    """A server on a free port that answers one request with chunks of a chunked body, then
    closes the connection without the terminating chunk (a stream cut off). Returns its URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def run():
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            for c in chunks:
                conn.sendall(b"%x\r\n%s\r\n" % (len(c), c))
        listener.close()

    threading.Thread(target=run, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_an_event_cut_off_after_its_id_does_not_move_the_last_event_id():
    s = Stream(serve_once([b"id: 7\n\n", b"id: 8\nevent: a\ndata: {}\n\n", b"id: 9\nevent: a\n"]))
    s.wait_ended(5)
    assert not s.clean_end
    assert [(e["id"], e["event"]) for e in s.events] == [("8", "a")]
    assert s.ids == ["7", "8"]   # 9 was never dispatched
    assert s.last_event_id == "8"  # what a reconnect sends: the event with id 9 comes again


def test_the_last_event_id_is_kept_across_events_without_one():
    s = Stream(serve_once([b"id: 3\nevent: a\ndata: 1\n\n", b"event: b\ndata: 2\n\n", b"data: 3"]))
    s.wait_ended(5)
    assert [(e["id"], e["event"], e["data"]) for e in s.events] == [("3", "a", "1"), ("3", "b", "2")]
    assert s.last_event_id == "3"
