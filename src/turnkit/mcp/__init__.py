"""MCP servers as tool sources: ``AgentConfig(tools=[MCPServer.stdio(...)])``.

``MCPServer.stdio(command, args=(), env=None)`` runs a server as a
subprocess; ``MCPServer.http(url)`` connects over streamable HTTP. Both use
the official ``mcp`` package (``pip install 'turnkit[mcp]'``), imported on
first use. ``await server.list_tools()`` gives its tools as turnkit
:class:`~turnkit.Tool` objects.
"""

from turnkit.mcp.server import MCPServer

__all__ = ["MCPServer"]
