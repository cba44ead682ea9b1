"""lumos-gym for other frameworks: envs served with the OpenEnv API, tools over MCP.

``envserver`` (``lumos-gym serve-env``) serves a registered env over HTTP and WebSocket for
OpenEnv clients (and ``lumos/remote``); ``sessions`` holds its sessions; ``tools``
(``lumos-gym serve-tools``) serves the execution module's tools as an MCP server. Nothing is
imported here: each module needs the ``envserver`` extra.
"""
