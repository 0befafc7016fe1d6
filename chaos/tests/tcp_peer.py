"""A TCP peer for the namespace tests, run inside a namespace: ``listen <port>`` accepts one
connection at a time and echoes lines back when started with ``--echo``, or ``connect <host>
<port>``; either way each stdin line is sent on the connection and each line received is
printed (stdout, flushed), so that a test sees what crossed and what did not."""

from __future__ import annotations

import socket
import sys
import threading


def pump_socket(conn: socket.socket, echo: bool) -> None:
    buffer = b""
    while chunk := conn.recv(65536):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            print(line.decode(), flush=True)
            if echo:
                conn.sendall(line + b"\n")


def pump_stdin(conn: socket.socket) -> None:
    for line in sys.stdin:
        conn.sendall(line.encode())


def main(argv: list[str]) -> None:
    echo = "--echo" in argv
    argv = [a for a in argv if a != "--echo"]
    if argv[0] == "listen":
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("0.0.0.0", int(argv[1])))
        server.listen()
        print("listening", flush=True)
        while True:
            conn, _ = server.accept()
            print("accepted", flush=True)
            threading.Thread(target=pump_stdin, args=(conn,), daemon=True).start()
            threading.Thread(target=pump_socket, args=(conn, echo), daemon=True).start()
    conn = socket.create_connection((argv[1], int(argv[2])), timeout=10)
    conn.settimeout(None)
    print("connected", flush=True)
    threading.Thread(target=pump_socket, args=(conn, echo), daemon=True).start()
    pump_stdin(conn)


if __name__ == "__main__":
    main(sys.argv[1:])
