"""Jupyter Server's kernel websocket with Nagle's algorithm off.

Stock Jupyter Server sends kernel messages on a websocket with Nagle's
algorithm on: tornado turns TCP_NODELAY back off once the HTTP upgrade
response is written (``tornado/http1connection.py``,
``HTTP1Connection._finish_request``), and Jupyter Server never turns it on
again. A small message written while the one before is not yet acknowledged
then waits in the server for the browser's delayed ACK (40 ms at least on
Linux). A widget's readouts, sent a few milliseconds after the kernel's
"busy" status, were seen on the wire (a packet capture on the loopback)
to leave the server about 40 ms after they were written, on about one
change in four. Tornado's documentation of ``WebSocketHandler.set_nodelay``
recommends turning it on for websockets that send small messages whose
latency matters.

``LabServer(tcp_nodelay=True)`` starts JupyterLab with
``--ServerApp.kernel_websocket_connection_class=nodelay.NoDelayConnection``.
"""

from __future__ import annotations

from jupyter_server.services.kernels.connection.channels import (
    ZMQChannelsWebsocketConnection)


class NoDelayConnection(ZMQChannelsWebsocketConnection):
    """Jupyter Server's kernel websocket connection, TCP_NODELAY on."""

    def connect(self):
        """Turn Nagle's algorithm off, then connect as Jupyter Server does."""
        self.websocket_handler.set_nodelay(True)
        return super().connect()
