"""Sockets to frames: one request in flight per connection, ordered responses, size limits."""

from samsa.network.server import CloseConnection, Connection, RequestHandler, Response, SocketServer

__all__ = ["CloseConnection", "Connection", "RequestHandler", "Response", "SocketServer"]
