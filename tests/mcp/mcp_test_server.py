"""The tests' own MCP server: ``python mcp_test_server.py`` serves it over stdio.

Tools: ``add`` (text), ``chart`` (an image), ``report`` (an embedded text
resource and a blob), ``broken`` (an error result), ``crash`` (the process
dies mid-call) and ``echo.upper`` (a name turnkit must make provider-safe).
:func:`app` is the same server as a streamable HTTP ASGI app.
"""

from __future__ import annotations

import base64
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import (
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    TextContent,
    TextResourceContents,
)

PNG = "iVBORw0KGgo="
PDF = base64.b64encode(b"%PDF-1.4 tiny").decode()

server = MCPServer("turnkit-test")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
def chart(title: str) -> list[TextContent | ImageContent]:
    """Draw a chart."""
    return [
        TextContent(type="text", text=f"Chart: {title}"),
        ImageContent(type="image", data=PNG, mime_type="image/png"),
    ]


@server.tool()
def report() -> list[EmbeddedResource]:
    """Fetch the report."""
    text = TextResourceContents(
        uri="file:///reports/summary.txt", mime_type="text/plain", text="All good."
    )
    blob = BlobResourceContents(
        uri="file:///reports/full.pdf", mime_type="application/pdf", blob=PDF
    )
    return [
        EmbeddedResource(type="resource", resource=text),
        EmbeddedResource(type="resource", resource=blob),
    ]


@server.tool()
def broken() -> str:
    """Always fails."""
    raise ToolError("the database is down")


@server.tool()
def crash() -> str:
    """Kills the server process while the call is running."""
    sys.stdout.flush()
    os._exit(17)


@server.tool(name="echo.upper")
def echo_upper(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


def app():
    return server.streamable_http_app()


if __name__ == "__main__":
    server.run("stdio")
